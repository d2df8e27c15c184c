"""Sending mail through the configured SMTP server (aiosmtplib), for email sign-in links."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr

import aiosmtplib

from memvault_gateway.settings import SmtpGroup


class MailNotSent(Exception):
    """The SMTP server could not be reached or refused the message; the text names only the error type."""


def message(smtp: SmtpGroup, to: str, subject: str, text: str) -> EmailMessage:
    """A plain-text message from the configured sender."""
    mail = EmailMessage()
    mail["From"] = smtp.from_address
    mail["To"] = to
    mail["Subject"] = subject
    mail["Date"] = formatdate(localtime=False, usegmt=True)
    domain = parseaddr(smtp.from_address)[1].rpartition("@")[2] or None
    mail["Message-ID"] = make_msgid(domain=domain)
    # Links in mail are marked automatic so vacation responders do not answer them (RFC 3834).
    mail["Auto-Submitted"] = "auto-generated"
    mail.set_content(text)
    return mail


async def send(smtp: SmtpGroup, mail: EmailMessage) -> None:
    """Hand `mail` to the SMTP server; MailNotSent when that fails."""
    password = smtp.password.get_secret_value()
    try:
        await aiosmtplib.send(
            mail,
            hostname=smtp.host,
            port=smtp.port,
            username=smtp.username or None,
            password=password or None,
            use_tls=smtp.security == "tls",
            start_tls=smtp.security == "starttls",
            timeout=smtp.timeout_seconds,
        )
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as error:
        raise MailNotSent(type(error).__name__) from None
