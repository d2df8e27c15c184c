"""Pairs of memories for calibrating the duplicate and conflict thresholds (memvault_vault.domain.duplicates).

Each category says what the right outcome is when the second text is written after the first:
rewordings are near-duplicates (skip), changed facts and negations must reach the owner as
similar (link, review), a changed name, a changed ordinary word or swapped roles make a fact about
someone or something else, which must never be skipped (linked as similar, or stored unlinked when it
scores lower), related and unrelated pairs must be stored without a link.
"""

from __future__ import annotations

# The second text says the same thing as the first: skip it as a near-duplicate.
REWORDINGS: list[tuple[str, str]] = [
    ("The homelab NAS is a Synology DS920+ with four 8 TB drives.", "Our homelab NAS is a Synology DS920+ with 4 drives of 8 TB."),
    ("Backups run nightly at 02:00 to the NAS.", "Every night at 02:00 the backups run to the NAS."),
    ("Sam prefers dark mode in every editor.", "Sam likes dark mode in all editors."),
    ("The memvault project deploys to the k3s cluster.", "Memvault is deployed on the k3s cluster."),
    ("Prefers British spelling in documents.", "Prefers British English spelling in documents."),
    ("The router runs OpenWrt 23.05.", "OpenWrt 23.05 runs on the router."),
    ("The team's standup is at 09:30 every weekday.", "Standup for the team is every weekday at 09:30."),
    ("Alice is allergic to peanuts.", "Alice has a peanut allergy."),
    ("The office Wi-Fi network is called Helios.", "The Wi-Fi network at the office is named Helios."),
    ("Uses Tailscale for remote access to the homelab.", "Remote access to the homelab goes through Tailscale."),
    ("The database for memvault is Postgres 15.", "Memvault's database is Postgres 15."),
    ("Sam's daughter Mia was born in 2019.", "Mia, Sam's daughter, was born in 2019."),
    ("The Grafana dashboard lives at grafana.home.arpa.", "Grafana's dashboard is at grafana.home.arpa."),
    ("Prefers tea over coffee in the afternoon.", "In the afternoon Sam prefers tea to coffee."),
    ("The printer is a Brother HL-L2350DW in the study.", "In the study there is a Brother HL-L2350DW printer."),
    ("Chose Postgres over SQLite for memvault because of concurrent writers.", "Memvault uses Postgres rather than SQLite because of concurrent writers."),
    ("The family car is a 2018 Toyota Corolla.", "A 2018 Toyota Corolla is the family car."),
    ("Code reviews need two approvals before merging.", "Before merging, code reviews need two approvals."),
    ("the homelab nas is a synology ds920+ with four 8 tb drives", "The homelab NAS is a Synology DS920+ with four 8 TB drives!"),
    ("Sam runs every Sunday morning in the park.", "Every Sunday morning Sam goes running in the park."),
]  # fmt: skip

# Rewordings of texts that name people, places, products and addresses: the names move, change case or
# start the sentence, and the text is still a near-duplicate.
NAMED_REWORDINGS: list[tuple[str, str]] = [
    ("Xavier Eriksen always orders an oat flat white, 2 cups a day.", "Two cups a day: Xavier Eriksen always orders an oat flat white."),
    ("Xavier Eriksen always orders an oat flat white, 2 cups a day.", "xavier eriksen always orders an oat flat white, 2 cups a day"),
    ("Marco Eriksen lives in Lisbon with his two cats.", "Marco Eriksen lives with his two cats in Lisbon."),
    ("Alice's work email is alice@acme.example.", "The work email of Alice is alice@acme.example."),
    ("The team wiki is at https://wiki.home.arpa/start.", "The team wiki lives at https://wiki.home.arpa/start/."),
    ("The build server is ci-alpha.lab.local.", "ci-alpha.lab.local is the build server."),
    ("The NAS config lives at /etc/nas/main.conf.", "The config of the NAS lives at /etc/nas/main.conf."),
    ("Sam works at Acme as a platform engineer.", "At Acme, Sam works as a platform engineer."),
    ("The router in the hallway runs OpenWrt.", "OpenWrt runs on the router in the hallway."),
    ("Dr. Okafor is the family dentist in Leeds.", "The family dentist in Leeds is Dr. Okafor."),
]  # fmt: skip

# The same statement with a different number, date, version or address: an update or a contradiction.
CHANGED_FACTS: list[tuple[str, str]] = [
    ("The internet connection is 1 Gbps.", "The internet connection is 2 Gbps."),
    ("Backups run nightly at 02:00 to the NAS.", "Backups run nightly at 03:00 to the NAS."),
    ("The NAS has four 8 TB drives.", "The NAS has four 12 TB drives."),
    ("The router runs OpenWrt 23.05.", "The router runs OpenWrt 24.10."),
    ("The NAS is at 192.168.1.20.", "The NAS is at 192.168.1.30."),
    ("The database for memvault is Postgres 15.", "The database for memvault is Postgres 16."),
    ("The dentist appointment is on March 3.", "The dentist appointment is on March 10."),
    ("The team's standup is at 09:30 every weekday.", "The team's standup is at 10:00 every weekday."),
    ("Rent is 1,450 EUR a month.", "Rent is 1,520 EUR a month."),
    ("The lease ends on 2026-06-30.", "The lease ends on 2027-06-30."),
    ("Sam's daughter Mia was born in 2019.", "Sam's daughter Mia was born in 2018."),
    ("The campaign budget is $50,000.", "The campaign budget is $35,000."),
    ("Trash is collected on Tuesday.", "Trash is collected on Thursday."),
    ("The flight to Lisbon leaves at 07:15.", "The flight to Lisbon leaves at 09:45."),
    ("Python 3.11 is the minimum version for memvault.", "Python 3.12 is the minimum version for memvault."),
    ("Code reviews need two approvals before merging.", "Code reviews need one approval before merging."),
    ("The gym membership costs 39 EUR per month.", "The gym membership costs 45 EUR per month."),
    ("The k3s cluster has three nodes.", "The k3s cluster has five nodes."),
    ("Sam runs every Sunday morning in the park.", "Sam runs every Saturday morning in the park."),
    ("The Kubernetes version is 1.29.", "The Kubernetes version is 1.31."),
]  # fmt: skip

# The second text says the opposite.
NEGATIONS: list[tuple[str, str]] = [
    ("Sam drinks coffee.", "Sam does not drink coffee."),
    ("The NAS is exposed to the internet.", "The NAS is not exposed to the internet."),
    ("Alice eats meat.", "Alice never eats meat."),
    ("Deploys to production need a manual approval.", "Deploys to production do not need a manual approval."),
    ("The cat is allowed in the bedroom.", "The cat isn't allowed in the bedroom."),
    ("Sam likes cilantro.", "Sam dislikes cilantro."),
    ("The homelab uses IPv6.", "The homelab doesn't use IPv6."),
    ("Backups are encrypted.", "Backups are not encrypted."),
    ("Prefers meetings in the morning.", "Never schedule meetings in the morning."),
    ("The project uses Docker Compose for local development.", "The project stopped using Docker Compose for local development."),
    ("Sam can drive on Fridays.", "Sam cannot drive on Fridays."),
    ("The VPN is required for the admin panel.", "The VPN is not required for the admin panel."),
]  # fmt: skip

# The same statement about another person, place, product, email, URL, host or path: never a near-duplicate.
CHANGED_NAMES: list[tuple[str, str]] = [
    ("Xavier Eriksen always orders an oat flat white, 2 cups a day.", "Marco Eriksen always orders an oat flat white, 2 cups a day."),
    ("Xavier Eriksen always orders an oat flat white, 2 cups a day.", "Xavier Larsen always orders an oat flat white, 2 cups a day."),
    ("Sam prefers dark mode in every editor and in the terminal.", "Dana prefers dark mode in every editor and in the terminal."),
    ("Sam's daughter goes to the Montessori school on Elm Street.", "Dana's daughter goes to the Montessori school on Elm Street."),
    ("Mia goes to the Montessori school on Elm Street.", "Mia goes to the Montessori school on Oak Street."),
    ("The team offsite this year is in Lisbon, at the usual hotel.", "The team offsite this year is in Porto, at the usual hotel."),
    ("Sam works at Acme as a platform engineer.", "Sam works at Globex as a platform engineer."),
    ("The office printer is a Brother laser printer.", "The office printer is a Canon laser printer."),
    ("The router in the hallway runs OpenWrt.", "The router in the hallway runs DD-WRT."),
    ("Alice's work email is alice@acme.example.", "Alice's work email is alice@globex.example."),
    ("The team wiki is at https://wiki.home.arpa/start.", "The team wiki is at https://docs.home.arpa/start."),
    ("The build server is ci-alpha.lab.local.", "The build server is ci-beta.lab.local."),
    ("The NAS config lives at /etc/nas/main.conf.", "The NAS config lives at /etc/nas/backup.conf."),
    ("The deploy script is scripts/deploy.sh in the infra repo.", "The deploy script is scripts/release.sh in the infra repo."),
    ("Dr. Okafor is the family dentist in Leeds.", "Dr. Mensah is the family dentist in Leeds."),
]  # fmt: skip

# The same sentence with another ordinary word (a team, a role, a room, a drink, a project): a fact about
# something else, never a near-duplicate; none of them is a name the names rule could see.
CHANGED_WORDS: list[tuple[str, str]] = [
    ("The support team's standup is at 09:30 in the Helios room.", "The infra team's standup is at 09:30 in the Helios room."),
    ("The spare keys are in the kitchen drawer.", "The spare keys are in the garage drawer."),
    ("Sam works as a nurse at the city hospital.", "Sam works as a teacher at the city hospital."),
    ("Dana always orders a soy latte in the morning.", "Dana always orders a green tea in the morning."),
    ("The mobile team owns the login page.", "The mobile team owns the checkout page."),
    ("Deploys to staging need an approval from the tech lead.", "Deploys to production need an approval from the tech lead."),
    ("Sam's bike is the red one in the shed.", "Sam's bike is the blue one in the shed."),
    ("The website project is run by the design team.", "The website project is run by the marketing team."),
    ("Mia's favourite food is pasta.", "Mia's favourite food is sushi."),
    ("The cat sleeps on the sofa in the living room.", "The dog sleeps on the sofa in the living room."),
    ("The weekly report goes to the finance team.", "The weekly report goes to the legal team."),
    ("The backup drive is kept in the basement.", "The backup drive is kept in the attic."),
    ("Sam keeps the spare keys for the flat, the car and the bike in the top kitchen drawer by the window.",
     "Sam keeps the spare keys for the flat, the car and the bike in the top bedroom drawer by the window."),
    ("When the on-call engineer is asleep, alerts from the payment service go to the backend channel first.",
     "When the on-call engineer is asleep, alerts from the payment service go to the frontend channel first."),
    ("For the family dinner on Sunday, Mia brings the dessert and her brother brings the salad.",
     "For the family dinner on Sunday, Mia brings the dessert and her sister brings the salad."),
]  # fmt: skip

# The same names and words with their roles swapped (who does what, from where to where): never a near-duplicate.
SWAPPED_ROLES: list[tuple[str, str]] = [
    ("Xavier Eriksen flies from Lisbon to Porto every March.", "Xavier Eriksen flies from Porto to Lisbon every March."),
    ("Carmen Silva is allergic to latex and sees Dr. Jensen about it.", "Carmen Jensen is allergic to latex and sees Dr. Silva about it."),
    ("Alice reports to Bob.", "Bob reports to Alice."),
    ("Alice is Bob's manager.", "Bob is Alice's manager."),
    ("Marco Eriksen met Xavier Larsen in Oslo last spring.", "Xavier Larsen met Marco Eriksen in Oslo last spring."),
    ("Sam prefers tea over coffee.", "Sam prefers coffee over tea."),
    ("The staging database replicates to the production one.", "The production database replicates to the staging one."),
    ("Ada sent the signed contract to Grace on Monday.", "Grace sent the signed contract to Ada on Monday."),
    ("Dana lends her car to Omar on weekends.", "Omar lends his car to Dana on weekends."),
    ("The Berlin office reports to the Madrid office.", "The Madrid office reports to the Berlin office."),
]  # fmt: skip

# Rewordings that keep most of the sentence: names and parts moved with their roles, small words changed.
# Still near-duplicates (the rule for changed words and swapped roles must leave them alone).
REWORDINGS_IN_PLACE: list[tuple[str, str]] = [
    ("Mia is Sam's daughter.", "Sam's daughter is Mia."),
    ("Alice and Bob share the flat in Leeds.", "Bob and Alice share the flat in Leeds."),
    ("The support team's standup is at 09:30 in the Helios room.", "Standup for the support team is at 09:30 in the Helios room."),
    ("Xavier Eriksen flies from Lisbon to Porto every March.", "Every March, Xavier Eriksen flies from Lisbon to Porto."),
    ("The spare keys are in the kitchen drawer.", "The spare keys are kept in the kitchen drawer."),
    ("Hana Weber works at Acme as an accountant.", "Hana Weber is an accountant at Acme."),
    ("The mobile team owns the login page.", "The login page is owned by the mobile team."),
    ("Carmen Silva sees Dr. Jensen about her latex allergy.", "Carmen Silva sees Dr. Jensen about her allergy to latex."),
    ("Ada sent the signed contract to Grace on Monday.", "On Monday Ada sent Grace the signed contract."),
    ("The cat sleeps on the sofa in the living room.", "In the living room, the cat sleeps on the sofa."),
    ("For the family dinner on Sunday, Mia brings the dessert and her brother brings the salad.",
     "Mia brings the dessert for the family dinner on Sunday, and her brother brings the salad."),
    ("Sam keeps the spare keys for the flat, the car and the bike in the top kitchen drawer by the window.",
     "The spare keys for the flat, the car and the bike are kept by Sam in the top kitchen drawer by the window."),
]  # fmt: skip

# Same topic, different facts: both true, no link needed.
RELATED: list[tuple[str, str]] = [
    ("The homelab NAS is a Synology DS920+.", "The homelab router runs OpenWrt."),
    ("Sam prefers dark mode in every editor.", "Sam prefers a 14 pt font in the terminal."),
    ("Backups run nightly at 02:00 to the NAS.", "The NAS sends an email when a drive fails."),
    ("Alice is allergic to peanuts.", "Alice is vegetarian."),
    ("Memvault's database is Postgres 15.", "Memvault's message bus is NATS JetStream."),
    ("The team's standup is at 09:30.", "The team's retrospective is every second Friday."),
    ("The family car is a 2018 Toyota Corolla.", "The car's next service is due in May."),
    ("Uses Tailscale for remote access.", "Uses Caddy as the reverse proxy."),
    ("Mia goes to the Montessori school on Elm Street.", "Mia's piano lessons are on Wednesdays."),
    ("The printer is a Brother HL-L2350DW.", "Printer toner is ordered from Amazon."),
]  # fmt: skip

# Nothing in common.
UNRELATED: list[tuple[str, str]] = [
    ("The homelab NAS is a Synology DS920+.", "Sam is allergic to cats."),
    ("Backups run nightly at 02:00.", "Prefers British spelling in documents."),
    ("The k3s cluster has three nodes.", "Mia's favourite colour is green."),
    ("The flight to Lisbon leaves at 07:15.", "Code reviews need two approvals."),
    ("Rent is 1,450 EUR a month.", "The router runs OpenWrt."),
    ("Alice is vegetarian.", "The Kubernetes version is 1.29."),
    ("Trash is collected on Tuesday.", "The memvault gateway speaks OAuth 2.1."),
    ("Sam runs every Sunday.", "The printer is a Brother HL-L2350DW."),
    ("The campaign budget is $50,000.", "The cat sleeps on the radiator."),
    ("Uses Tailscale for remote access.", "The dentist appointment is on March 3."),
]  # fmt: skip

CATEGORIES: dict[str, tuple[list[tuple[str, str]], tuple[str | None, ...]]] = {
    "rewording": (REWORDINGS, ("near-duplicate",)),
    "rewording naming people, places, products, addresses": (NAMED_REWORDINGS, ("near-duplicate",)),
    "changed number, date, version or address": (CHANGED_FACTS, ("similar",)),
    "rewording keeping the sentence (names moved with their roles, small words changed)": (
        REWORDINGS_IN_PLACE,
        ("near-duplicate",),
    ),
    "changed name (person, place, product, email, URL, host, path)": (CHANGED_NAMES, ("similar", None)),
    "changed ordinary word (team, role, room, drink, project)": (CHANGED_WORDS, ("similar", None)),
    "same names and words, roles swapped": (SWAPPED_ROLES, ("similar", None)),
    "negation": (NEGATIONS, ("similar",)),
    "related (same topic, different fact)": (RELATED, (None,)),
    "unrelated": (UNRELATED, (None,)),
}
"""Each category's pairs and the outcomes that are right for them (`duplicates.classify`)."""
