"""Chats through the REST API: roles, bad input, one server per model, and the server's side."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from controlplane.chat.models import ChatMessage, ChatSession, MessageStatus
from controlplane.chat.services import chat_message_send, chats_settle
from controlplane.chat.tasks import chats_settle_task
from controlplane.checkpoints.models import Checkpoint
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from tests.conftest import Persona, run_token_for
from tests.controlplane.chat.conftest import chat_create, post, send

pytestmark = pytest.mark.django_db


def chat_servers() -> list[Run]:
    return list(Run.objects.filter(recipe="chat").order_by("id"))


def server_client(run: Run):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    return client


def test_a_member_chats_with_a_checkpoint_named_openly(teammate: Persona, checkpoint: Checkpoint) -> None:
    chat = chat_create(teammate.client, checkpoint)
    assert (chat["checkpoint"], chat["run"], chat["step"], chat["uri"]) == (
        checkpoint.id,
        checkpoint.run_id,
        20,
        "/models/step-20",
    )
    assert chat["messages"] == [] and chat["server"] is None
    sent = send(teammate.client, chat["id"], "hello")
    assert sent["message"]["role"] == "user" and sent["message"]["text"] == "hello"
    assert sent["reply"]["role"] == "assistant" and sent["reply"]["status"] == "PENDING"
    [server] = chat_servers()
    assert server.config["uri"] == "/models/step-20" and server.project_id == checkpoint.run.project_id
    assert sent["reply"]["server_run"] == server.id
    detail = teammate.client.get(f"/api/v1/chats/{chat['id']}").json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
    assert detail["server"] == {"run": server.id, "status": "QUEUED", "waiting_for": ""}
    listed = teammate.client.get("/api/v1/chats", {"checkpoint": checkpoint.id}).json()
    assert [c["id"] for c in listed["results"]] == [chat["id"]]


def test_viewers_read_chats_but_may_not_start_or_send(owner: Persona, viewer: Persona, checkpoint: Checkpoint) -> None:
    chat = chat_create(owner.client, checkpoint)
    assert viewer.client.get(f"/api/v1/chats/{chat['id']}").status_code == 200
    refused = post(viewer.client, f"/api/v1/chats/{chat['id']}/messages", {"text": "hi"})
    assert refused.status_code == 403 and "Viewers read chats" in refused.json()["message"]
    assert post(viewer.client, "/api/v1/chats", {"checkpoint": checkpoint.id}).status_code == 403
    assert not ChatMessage.objects.exists() and not chat_servers()


def test_outsiders_find_no_chat_and_no_checkpoint(owner: Persona, outsider: Persona, checkpoint: Checkpoint) -> None:
    chat = chat_create(owner.client, checkpoint)
    assert outsider.client.get(f"/api/v1/chats/{chat['id']}").status_code == 404
    assert post(outsider.client, f"/api/v1/chats/{chat['id']}/messages", {"text": "hi"}).status_code == 404
    created = post(outsider.client, "/api/v1/chats", {"checkpoint": checkpoint.id})
    assert created.status_code == 404 and "checkpoint" in created.json()["fields"]
    assert outsider.client.get("/api/v1/chats").json()["count"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x" * 8001}, "text"),
        ({"text": "a\u0000b"}, "text"),
        ({"text": "   "}, "text"),
        ({"text": 5}, "text"),
        ({}, "text"),
    ],
)
def test_a_bad_message_is_a_400_naming_the_field(owner: Persona, checkpoint: Checkpoint, body, field) -> None:
    chat = chat_create(owner.client, checkpoint)
    response = post(owner.client, f"/api/v1/chats/{chat['id']}/messages", body)
    assert response.status_code == 400 and field in response.json()["fields"], response.json()
    assert not ChatMessage.objects.exists()


def test_a_chat_without_a_checkpoint_names_what_is_missing(owner: Persona) -> None:
    response = post(owner.client, "/api/v1/chats", {"uri": "/models/x"})
    assert response.status_code == 400 and "project" in response.json()["fields"]
    made = post(owner.client, "/api/v1/chats", {"project": "lab/default", "uri": "/models/x", "label": "outside"})
    assert made.status_code == 201 and made.json()["checkpoint"] is None and made.json()["label"] == "outside"


def test_a_second_message_reuses_the_live_server_and_another_model_gets_its_own(
    owner: Persona, teammate: Persona, checkpoint: Checkpoint
) -> None:
    first = chat_create(owner.client, checkpoint)
    second = chat_create(teammate.client, checkpoint)
    send(owner.client, first["id"])
    send(teammate.client, second["id"])
    assert len(chat_servers()) == 1
    other = Checkpoint.objects.create(run=checkpoint.run, step=40, uri="/models/step-40")
    send(owner.client, chat_create(owner.client, other)["id"])
    assert [r.config["uri"] for r in chat_servers()] == ["/models/step-20", "/models/step-40"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_messages_start_one_server(owner: Persona, teammate: Persona, checkpoint: Checkpoint) -> None:
    sessions = [
        ChatSession.objects.create(
            project=checkpoint.run.project, created_by=p.user, checkpoint=checkpoint, uri=checkpoint.uri
        )
        for p in (owner, teammate, owner, teammate)
    ]
    barrier = threading.Barrier(len(sessions))
    errors: list[BaseException] = []

    def send_one(session: ChatSession) -> None:
        try:
            barrier.wait()
            chat_message_send(user=session.created_by, session=session, text="hi")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send_one, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    [server] = chat_servers()
    assert set(ChatMessage.objects.filter(role="assistant").values_list("server_run", flat=True)) == {server.id}


def test_the_server_takes_messages_first_come_first_served_and_streams_the_reply(
    owner: Persona, teammate: Persona, checkpoint: Checkpoint
) -> None:
    first = chat_create(owner.client, checkpoint)
    second = chat_create(teammate.client, checkpoint)
    send(owner.client, first["id"], "one")
    send(teammate.client, second["id"], "two")
    [server] = chat_servers()
    job = server_client(server)
    taken = post(job, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0})
    assert taken.status_code == 200
    body = taken.json()
    assert body["session"] == first["id"] and body["turns"] == [{"role": "user", "text": "one"}]
    path = f"/api/v1/runs/{server.id}/chat/{body['message']}"
    assert post(job, f"{path}/tokens", {"text": "o"}).status_code == 204
    done = post(job, f"{path}/done", {"text": "oh", "tokens": 2, "ttft_ms": 12.5, "tokens_per_s": 40.0})
    assert done.status_code == 200 and done.json()["status"] == "DONE"
    assert post(job, f"{path}/done", {"text": "oh", "tokens": 2, "ttft_ms": 1, "tokens_per_s": 1}).status_code == 409
    assert post(job, f"{path}/tokens", {"text": "late"}).status_code == 409
    nxt = post(job, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0}).json()
    assert nxt["session"] == second["id"]
    assert post(job, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0}).status_code == 204

    # The next turn carries the conversation so far.
    send(owner.client, first["id"], "again")
    again = post(job, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0}).json()
    assert again["turns"] == [
        {"role": "user", "text": "one"},
        {"role": "assistant", "text": "oh"},
        {"role": "user", "text": "again"},
    ]
    reply = owner.client.get(f"/api/v1/chats/{first['id']}").json()["messages"][1]
    assert (reply["text"], reply["tokens"], reply["ttft_ms"], reply["tokens_per_s"]) == ("oh", 2, 12.5, 40.0)


def test_a_server_that_asks_for_work_no_longer_shows_a_wait(owner: Persona, checkpoint: Checkpoint) -> None:
    """A note a reconcile pass left while the model's actor waited for CPUs goes once the server
    asks for its first message: the chat page must not say "waiting" beside streaming replies."""
    chat = chat_create(owner.client, checkpoint)
    send(owner.client, chat["id"], "one")
    [server] = chat_servers()
    Run.objects.filter(id=server.id).update(waiting_for="waiting for cluster resources: 1 actor needs {CPU: 1}")
    assert owner.client.get(f"/api/v1/chats/{chat['id']}").json()["server"]["waiting_for"]
    assert post(server_client(server), f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0}).status_code == 200
    assert owner.client.get(f"/api/v1/chats/{chat['id']}").json()["server"]["waiting_for"] == ""
    assert Run.objects.get(id=server.id).waiting_since is None


def test_only_the_chat_servers_own_token_serves(owner: Persona, checkpoint: Checkpoint, run: Run) -> None:
    send(owner.client, chat_create(owner.client, checkpoint)["id"])
    [server] = chat_servers()
    assert post(owner.client, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0}).status_code == 403
    # A run that is no chat server (the checkpoint's own smoke run) serves nothing.
    assert post(server_client(run), f"/api/v1/runs/{run.id}/chat/next", {"wait_s": 0}).status_code == 404
    assert post(server_client(run), f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0}).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_long_poll_waits_on_redis_and_answers_when_a_message_comes(owner: Persona, checkpoint: Checkpoint) -> None:
    chat = chat_create(owner.client, checkpoint)
    session = ChatSession.objects.get(id=chat["id"])
    chat_message_send(user=owner.user, session=session, text="first")
    [server] = chat_servers()
    job = server_client(server)
    assert post(job, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0}).status_code == 200
    started = time.monotonic()
    assert post(job, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 0.5}).status_code == 204
    assert time.monotonic() - started >= 0.45

    def later() -> None:
        time.sleep(0.5)
        chat_message_send(user=owner.user, session=session, text="second")
        connection.close()

    threading.Thread(target=later).start()
    started = time.monotonic()
    answer = post(job, f"/api/v1/runs/{server.id}/chat/next", {"wait_s": 10})
    assert answer.status_code == 200 and answer.json()["turns"][-1]["text"] == "second"
    assert time.monotonic() - started < 5  # woken, not timed out


def test_a_failed_server_fails_its_pending_replies_with_its_reason(owner: Persona, checkpoint: Checkpoint) -> None:
    chat = chat_create(owner.client, checkpoint)
    send(owner.client, chat["id"])
    [server] = chat_servers()
    attempt = server.attempts.get().id
    transition(attempt, [RunStatus.QUEUED], RunStatus.RUNNING)
    transition(attempt, [RunStatus.RUNNING], RunStatus.FAILED, reason="CUDA out of memory")
    assert chats_settle_task() == 1
    reply = owner.client.get(f"/api/v1/chats/{chat['id']}").json()["messages"][1]
    assert reply["status"] == "FAILED" and "CUDA out of memory" in reply["failure_reason"]
    assert str(server.id) in reply["failure_reason"]
    assert chats_settle() == 0  # settled once
    # The next message starts a new server.
    send(owner.client, chat["id"])
    assert len(chat_servers()) == 2


def test_a_reply_left_waiting_by_a_server_that_went_idle_gets_a_new_server(
    owner: Persona, checkpoint: Checkpoint
) -> None:
    chat = chat_create(owner.client, checkpoint)
    send(owner.client, chat["id"])
    [server] = chat_servers()
    attempt = server.attempts.get().id
    transition(attempt, [RunStatus.QUEUED], RunStatus.RUNNING)
    transition(attempt, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    detail = owner.client.get(f"/api/v1/chats/{chat['id']}").json()  # a read settles
    _, second = chat_servers()
    assert detail["messages"][1]["status"] == "PENDING" and detail["messages"][1]["server_run"] == second.id
    assert detail["server"]["run"] == second.id
    assert ChatMessage.objects.get(id=detail["messages"][1]["id"]).status == MessageStatus.PENDING


def test_a_chat_server_and_an_eval_s_generation_run_cannot_use_each_other_s_endpoints(
    owner: Persona, checkpoint: Checkpoint
) -> None:
    """A chat names its model openly; it must not be a way into an OPEN eval's generations."""
    from controlplane.evals import services as eval_services

    eval_set = eval_services.eval_set_create(
        user=owner.user, team=checkpoint.run.project.team, name="s", jsonl='{"prompt": "1+2="}'
    )
    evaluation = eval_services.eval_create(
        user=owner.user,
        project=checkpoint.run.project_id,
        name="e",
        eval_set_id=eval_set.id,
        checkpoints=[checkpoint.id],
        external=[{"uri": "/models/other", "label": "other"}],
    )
    generation = evaluation.generation_run
    assert generation is not None
    send(owner.client, chat_create(owner.client, checkpoint)["id"])
    [server] = chat_servers()
    # The generation run's token takes no chat message; the chat server's posts no generation.
    assert post(server_client(generation), f"/api/v1/runs/{generation.id}/chat/next", {"wait_s": 0}).status_code == 404
    body = {"generations": [{"candidate": "k", "prompt": 1, "sample": 0, "text": "t", "tokens": 1}]}
    assert post(server_client(server), f"/api/v1/runs/{server.id}/generations", body).status_code == 404
    # The server's config names its model and nothing of the eval (its replies draw a fresh seed each).
    assert server.config["uri"] == checkpoint.uri and "eval_id" not in server.config
    assert ChatMessage.objects.filter(status=MessageStatus.PENDING).count() == 1


def test_a_model_judged_blind_in_an_open_eval_is_not_chatted_with_until_it_closes(
    owner: Persona, checkpoint: Checkpoint
) -> None:
    """Its answers in a chat could be matched to a battle's sides: blindness would be a convention."""
    from controlplane.evals.models import Eval
    from tests.controlplane.evals.conftest import eval_create, eval_set_create, generations_post, run_succeed

    earlier = chat_create(owner.client, checkpoint)  # a chat from before the eval
    project = checkpoint.run.project
    created = eval_create(owner.client, project, eval_set_create(owner.client)["id"], checkpoints=[checkpoint.id])
    evaluation = Eval.objects.get(id=created["id"])
    assert evaluation.generation_run is not None
    generations_post(evaluation, server_client(evaluation.generation_run))
    run_succeed(evaluation.generation_run)
    assert owner.client.get(f"/api/v1/evals/{evaluation.id}").json()["status"] == "OPEN"

    refused = post(owner.client, "/api/v1/chats", {"checkpoint": checkpoint.id})
    assert refused.status_code == 409, refused.json()
    assert f"judged blind in eval {evaluation.id}" in refused.json()["message"]
    by_path = post(owner.client, "/api/v1/chats", {"project": project.id, "uri": checkpoint.uri, "label": "x"})
    assert by_path.status_code == 409
    again = post(owner.client, f"/api/v1/chats/{earlier['id']}/messages", {"text": "1+2="})
    assert again.status_code == 409 and ChatMessage.objects.count() == 0
    other = Checkpoint.objects.create(run=checkpoint.run, step=40, uri="/models/step-40")
    assert post(owner.client, "/api/v1/chats", {"checkpoint": other.id}).status_code == 201  # not in the eval

    assert post(owner.client, f"/api/v1/evals/{evaluation.id}/close", {}).status_code == 200
    send(owner.client, earlier["id"])
    assert chat_create(owner.client, checkpoint)["checkpoint"] == checkpoint.id
