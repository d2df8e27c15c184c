"""GetMessages on a real Postgres: messages by source node id or stable key at a pinned revision, the
revision read named, unknown ids and keys named, and the limits checked before anything is read."""

from __future__ import annotations

import pytest
import test_archive_reads
from test_archive_reads import create, refused, stub
from vault_helpers import Caller

from memvault.vault.v1 import archive_pb2 as pb

pytestmark = pytest.mark.integration

# The fixtures of the archive's read tests: a vault server on a free port, and a new owner per test.
archive_stub = test_archive_reads.archive_stub
owner = test_archive_reads.owner


async def messages(caller: Caller, conversation_id: str, **fields: object) -> pb.GetMessagesResponse:
    return await stub(caller).GetMessages(  # type: ignore[no-any-return]
        pb.GetMessagesRequest(vault=caller.vault, conversation_id=conversation_id, **fields),  # type: ignore[arg-type]
        metadata=caller.metadata(),
    )


async def test_messages_are_read_by_node_id_or_key_at_a_pinned_revision(owner: Caller) -> None:
    receipt = await create(owner, ["first", "second", "third"], title="Lookups")
    conversation_id = receipt.conversation_id
    whole = await stub(owner).GetConversation(
        pb.GetConversationRequest(vault=owner.vault, conversation_id=conversation_id), metadata=owner.metadata()
    )
    nodes = [m.node_id for m in whole.messages]
    await stub(owner).UpsertMessages(
        pb.UpsertMessagesRequest(
            vault=owner.vault,
            conversation_id=conversation_id,
            base_revision=1,
            messages=[pb.KeyedMessage(key="note/a", role="user", text="keyed at two")],
        ),
        metadata=owner.metadata(),
    )

    # The head (revision 2): asked in any order, answered once each in position order, the unknown named.
    head = await messages(owner, conversation_id, node_ids=[nodes[2], nodes[0], nodes[0], "nope"], keys=["note/a", "x"])
    assert head.revision == 2 and head.conversation.title == "Lookups"
    assert [m.text for m in head.messages] == ["first", "third", "keyed at two"]
    assert [m.key for m in head.messages] == ["", "", "note/a"]
    assert [m.position for m in head.messages] == sorted(m.position for m in head.messages)
    assert (list(head.missing_node_ids), list(head.missing_keys)) == (["nope"], ["x"])
    # A node asked for by both its node id and its key comes back once.
    keyed_node = head.messages[-1].node_id
    both = await messages(owner, conversation_id, node_ids=[keyed_node], keys=["note/a"])
    assert [m.text for m in both.messages] == ["keyed at two"]

    # Revision 1, pinned, never held the keyed message.
    pinned = await messages(owner, conversation_id, revision=1, node_ids=[nodes[1]], keys=["note/a"])
    assert pinned.revision == 1
    assert [m.text for m in pinned.messages] == ["second"] and list(pinned.missing_keys) == ["note/a"]

    # By the archive's own message ids (exact whatever the node id): pinned, each once, the unknown named.
    ids = [m.id for m in whole.messages]
    by_id = await messages(owner, conversation_id, revision=1, message_ids=[ids[2], ids[0], ids[0].upper()])
    assert [m.text for m in by_id.messages] == ["first", "third"] and not by_id.missing_message_ids
    unknown = "00000000-0000-4000-8000-000000000000"
    mixed = await messages(owner, conversation_id, node_ids=[nodes[1]], message_ids=[ids[1], unknown])
    assert [m.text for m in mixed.messages] == ["second"] and list(mixed.missing_message_ids) == [unknown]

    call = stub(owner).GetMessages
    for bad_id in ("", "not-a-uuid", "x" * 300):
        bad = pb.GetMessagesRequest(vault=owner.vault, conversation_id=conversation_id, message_ids=[bad_id])
        kind, text = await refused(call, bad, owner.metadata())
        assert kind == "invalid_argument" and "message_ids" in text
    empty = pb.GetMessagesRequest(vault=owner.vault, conversation_id=conversation_id)
    kind, text = await refused(call, empty, owner.metadata())
    assert kind == "invalid_argument" and "node_ids, keys or message_ids" in text
    # Repeats count once: 60 node ids and one key 41 times are 61 lookups; 41 different keys are 101.
    fine = await messages(owner, conversation_id, node_ids=[f"n{i}" for i in range(60)], keys=["k"] * 41)
    assert (len(fine.missing_node_ids), list(fine.missing_keys)) == (60, ["k"])
    too_many = pb.GetMessagesRequest(
        vault=owner.vault, conversation_id=conversation_id, node_ids=[f"n{i}" for i in range(60)]
    )
    too_many.keys.extend(f"k{i}" for i in range(41))
    kind, text = await refused(call, too_many, owner.metadata())
    assert kind == "limit_exceeded" and "at most 100" in text
    for bad in ("", "x" * 201, "a\x00b"):
        kind, text = await refused(
            call,
            pb.GetMessagesRequest(vault=owner.vault, conversation_id=conversation_id, keys=[bad]),
            owner.metadata(),
        )
        assert kind == "invalid_argument" and "keys" in text
    gone = pb.GetMessagesRequest(vault=owner.vault, conversation_id=conversation_id, revision=9, node_ids=[nodes[0]])
    kind, text = await refused(call, gone, owner.metadata())
    assert kind == "not_found" and "no revision 9" in text


async def test_another_vaults_conversation_is_not_found(owner: Caller, database: object) -> None:
    receipt = await create(owner, ["private"])
    stranger = await test_archive_reads.new_owner(database, owner.stub)  # type: ignore[arg-type]
    request = pb.GetMessagesRequest(vault=stranger.vault, conversation_id=receipt.conversation_id, node_ids=["a"])
    kind, _ = await refused(stub(stranger).GetMessages, request, stranger.metadata())
    assert kind == "not_found"


async def test_an_answer_too_large_for_one_call_names_the_messages_left_for_the_next(owner: Caller) -> None:
    # Twelve messages of 100,000 four-byte characters: 4.8 MB together, over the 4 MiB one gRPC answer carries.
    big = "🦉" * 99_990
    receipt = await create(owner, [f"{i}{big}" for i in range(2)])  # two per write: its 1 MiB cap
    conversation_id = receipt.conversation_id
    for revision, start in enumerate(range(2, 12, 2), start=1):
        await stub(owner).AppendMessages(
            pb.AppendMessagesRequest(
                vault=owner.vault,
                conversation_id=conversation_id,
                base_revision=revision,
                messages=[pb.MessageDraft(role="user", text=f"{i}{big}") for i in range(start, start + 2)],
            ),
            metadata=owner.metadata(),
        )
    ids = []
    for start in (0, 6):
        page = await stub(owner).GetConversation(
            pb.GetConversationRequest(
                vault=owner.vault, conversation_id=conversation_id, limit=6, start_position=start
            ),
            metadata=owner.metadata(),
        )
        ids += [m.id for m in page.messages]
    assert len(ids) == 12

    first = await messages(owner, conversation_id, message_ids=ids)
    assert first.ByteSize() < 4 * 1024 * 1024 and 0 < len(first.messages) < 12
    assert [m.id for m in first.messages] + list(first.not_read_message_ids) == ids
    assert not first.missing_message_ids
    rest = await messages(owner, conversation_id, message_ids=list(first.not_read_message_ids))
    assert [m.id for m in rest.messages] == list(first.not_read_message_ids) and not rest.not_read_message_ids
    assert [m.text[:2] for m in rest.messages] == [f"{i}🦉"[:2] for i in range(len(first.messages), 12)]
