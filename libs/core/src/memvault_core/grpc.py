"""gRPC plumbing shared by servers and clients.

- `ErrorInterceptor` turns `MemvaultError` into a status code plus trailing
  metadata naming the error kind and field; `error_from_rpc` turns it back on
  the client side, so one error hierarchy crosses the wire intact.
- `build_server` wires tracing, errors, message-size limits and the standard
  health service; `serve_until_stopped` handles graceful shutdown.
- `client_channel` is a traced channel with the same message-size limits.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor

from memvault_core import limits, metrics
from memvault_core.errors import ERROR_KINDS, InvalidArgument, LimitExceeded, MemvaultError, Unavailable
from memvault_core.identity import GRPC_METADATA_KEY

log = logging.getLogger(__name__)

KIND_KEY = "memvault-error-kind"
FIELD_KEY = "memvault-error-field"

_STATUS_OF_KIND: dict[str, grpc.StatusCode] = {
    "not_found": grpc.StatusCode.NOT_FOUND,
    "invalid_argument": grpc.StatusCode.INVALID_ARGUMENT,
    "conflict": grpc.StatusCode.ALREADY_EXISTS,
    "permission_denied": grpc.StatusCode.PERMISSION_DENIED,
    "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "limit_exceeded": grpc.StatusCode.OUT_OF_RANGE,
    "internal": grpc.StatusCode.INTERNAL,
}

_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", limits.MAX_REQUEST_BYTES),
    ("grpc.max_receive_message_length", limits.MAX_REQUEST_BYTES),
]

Handler = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]


class ErrorInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Maps MemvaultError to gRPC status; anything else is logged and reported as INTERNAL, unless
    `translate` (a service's own knowledge, e.g. a lost database) turns it into a MemvaultError."""

    def __init__(
        self, translate: Callable[[Exception], MemvaultError | None] | None = None, service: str = "grpc"
    ) -> None:
        self._translate = translate
        self._service = service

    def _observe(self, method: str, code: grpc.StatusCode, started: float) -> None:
        """Time the call by its declared method (only handled methods reach here) and status."""
        metrics.GRPC_SECONDS.labels(self._service, method, code.name).observe(time.perf_counter() - started)
        if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
            metrics.ERRORS.labels(self._service, "grpc").inc()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        if handler.unary_stream is not None:  # a streamed answer (a backup): errors map the same way
            streaming = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                started = time.perf_counter()
                try:
                    self._refuse_nul(request)
                    async for response in streaming(request, context):
                        yield response
                    self._observe(method, grpc.StatusCode.OK, started)
                    return
                except asyncio.CancelledError:
                    self._observe(method, grpc.StatusCode.CANCELLED, started)
                    raise
                except Exception as error:
                    await self._abort(error, context, method, started)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary is not None:  # a streamed request (a restore)
            receiving = handler.stream_unary

            async def stream_unary(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
                started = time.perf_counter()
                try:
                    response = await receiving(requests, context)
                except asyncio.CancelledError:
                    self._observe(method, grpc.StatusCode.CANCELLED, started)
                    raise
                except Exception as error:
                    await self._abort(error, context, method, started)
                self._observe(method, grpc.StatusCode.OK, started)
                return response

            return grpc.stream_unary_rpc_method_handler(
                stream_unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_unary is None:
            return handler
        inner: Handler = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            try:
                self._refuse_nul(request)
                response = await inner(request, context)
            except asyncio.CancelledError:
                self._observe(method, grpc.StatusCode.CANCELLED, started)
                raise
            except Exception as error:
                await self._abort(error, context, method, started)
            self._observe(method, grpc.StatusCode.OK, started)
            return response

        return grpc.unary_unary_rpc_method_handler(
            unary,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    @staticmethod
    def _refuse_nul(request: Any) -> None:
        if isinstance(request, Message) and (field := nul_field(request)) is not None:
            raise InvalidArgument(
                f"{field} contains a NUL character (\\x00), which memvault cannot store; remove it",
                field=field,
            )

    async def _abort(self, error: Exception, context: grpc.aio.ServicerContext, method: str, started: float) -> None:
        if isinstance(error, MemvaultError):
            status, message, trailers = _status_of(error)
        else:
            translated = self._translate(error) if self._translate else None
            if translated is not None:
                status, message, trailers = _status_of(translated)
            else:
                log.exception("unhandled error in %s", method)
                status, message, trailers = grpc.StatusCode.INTERNAL, "internal error; see the vault log", ()
        self._observe(method, status, started)
        context.set_trailing_metadata(trailers)
        await context.abort(status, message)


def nul_field(message: Message, prefix: str = "") -> str | None:
    """The first string field of `message` (nested messages included) holding a NUL character,
    named as a path like `items[3].content`; None when there is none. Postgres text cannot hold NUL:
    refused here, every such input gets a clear error instead of failing in the database."""
    for field, value in message.ListFields():
        name = prefix + field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            entries = [(f"{name}[{key!r}]", key, item) for key, item in value.items()]
            for path, key, item in entries:
                if isinstance(key, str) and "\x00" in key:
                    return path
                found = _nul_in(item, path)
                if found is not None:
                    return found
            continue
        items = list(enumerate(value)) if field.is_repeated else [(None, value)]
        for index, item in items:
            found = _nul_in(item, name if index is None else f"{name}[{index}]")
            if found is not None:
                return found
    return None


def _nul_in(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, Message):
        return nul_field(value, path + ".")
    return None


def _status_of(error: MemvaultError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, str], ...]]:
    trailers = ((KIND_KEY, error.kind), (FIELD_KEY, error.field or ""))
    return _STATUS_OF_KIND.get(error.kind, grpc.StatusCode.INTERNAL), error.message, trailers


def error_from_rpc(error: grpc.aio.AioRpcError, service: str = "vault") -> MemvaultError:
    """The MemvaultError a failed call stands for."""
    trailers = {key: value for key, value in (error.trailing_metadata() or ()) if isinstance(value, str)}
    kind = trailers.get(KIND_KEY)
    if kind in ERROR_KINDS:
        return ERROR_KINDS[kind](error.details() or kind, field=trailers.get(FIELD_KEY) or None)
    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(f"the {service} service did not answer in time; try again in a few seconds")
    if error.code() == grpc.StatusCode.UNAVAILABLE:  # nothing listening, or the connection broke
        return Unavailable(
            f"the {service} service cannot be reached ({error.details() or 'unavailable'}); "
            "try again in a few seconds, and check that it is running if this persists"
        )
    if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:  # a message over the size limit, either way
        return LimitExceeded(
            f"the request or its answer is larger than {limits.MAX_REQUEST_BYTES // (1024 * 1024)} MiB, the most "
            "one call may carry; send or ask for fewer or shorter items per call",
            limit=limits.MAX_REQUEST_BYTES,
        )
    return MemvaultError(f"the {service} service failed ({error.code().name}); see its log")


def build_server(
    listen: str,
    translate_error: Callable[[Exception], MemvaultError | None] | None = None,
    service: str = "grpc",
) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    """A server with tracing, metrics (labelled `service`), error mapping, size limits and the gRPC
    health service."""
    server = grpc.aio.server(
        interceptors=[aio_server_interceptor(), ErrorInterceptor(translate_error, service)],  # type: ignore[no-untyped-call]
        options=_CHANNEL_OPTIONS,
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if server.add_insecure_port(listen) == 0:
        raise OSError(f"cannot listen on {listen}")
    return server, health_servicer


async def serve_until_stopped(
    server: grpc.aio.Server,
    health_servicer: health.aio.HealthServicer,
    service_names: Sequence[str],
    grace_seconds: float = 10.0,
) -> None:
    """Serve until SIGTERM or SIGINT, then report NOT_SERVING and drain in-flight calls."""
    await server.start()
    for name in ("", *service_names):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down", extra={"grace_seconds": grace_seconds})
    await health_servicer.enter_graceful_shutdown()
    await server.stop(grace_seconds)


_CLIENT_OPTIONS = [
    *_CHANNEL_OPTIONS,
    # Notice a restarted peer within seconds, not the default two minutes of backoff.
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 3000),
]


def client_channel(target: str) -> grpc.aio.Channel:
    """A traced insecure channel (traffic stays inside the cluster or on loopback)."""
    return grpc.aio.insecure_channel(target, options=_CLIENT_OPTIONS, interceptors=aio_client_interceptors())  # type: ignore[no-untyped-call]


def identity_token(context: grpc.aio.ServicerContext) -> str | None:
    """The signed identity a call carries in its metadata, if any (checked by `IdentitySigner`)."""
    token = dict(context.invocation_metadata() or ()).get(GRPC_METADATA_KEY)
    return token if isinstance(token, str) else None
