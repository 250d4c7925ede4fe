"""Asking a person (section ``ask``; issue 43): an answer's commit -> the waiting agent's parked
``claim_next`` answered, and a question's commit -> each viewer's Board stream naming it, on one
``switchboard serve``. How each is timed: docs/benchmarks.md, "Asking a person"."""

from __future__ import annotations

import json
import socket
import threading
import time

from bench import db, httpbench, seed
from bench.ledger import latency
from bench.table import ints, log, pp, table, verdict
from bench.workers import ParkedPoll

TARGET = {"wake_p95_ms": 50.0, "stream_p95_ms": 1000.0}  # issue 43
PARK_S = 0.15  # the long-poll is parked this long before the answer
QUIET_S = 0.6  # between a todo's claim and its question (the stream gathers FLUSH_GAP)
GAP_S = 0.3  # after a question, before the next todo
WAIT_SECONDS = 10
OPTIONS = [  # flag, type, default, --quick's, help
    ("--ask-answers", int, 200, 40, "answers, each waking a parked claim_next"),
    ("--ask-questions", int, 30, 10, "questions watched on the stream, per viewer count"),
    ("--ask-viewers", ints, [1, 50], [1, 50], "viewers of the live stream"),
]


def wake(server, endpoint, token: str, person, n: int) -> dict:
    from switchboard.queues import transitions
    from switchboard.queues.transitions import Actor

    agent, human = Actor.agent(endpoint), Actor.human(person)
    seen, answer_s, wrong = [], [], 0
    with ParkedPoll(server.base_url, token, WAIT_SECONDS) as poll:
        for i in range(n):
            todo, _ = transitions.create_todo(agent, title=f"ask {i}")
            seq = transitions.claim(agent, todo.id).attempt_seq
            asked = {"question": "Go ahead?", "choices": ["yes", "no"]}
            transitions.release(agent, todo.id, attempt_seq=seq, **asked)

            def ring(todo_id=todo.id) -> int:
                transitions.answer(human, todo_id, value="yes")
                return todo_id

            took, woke, right = poll.woken(ring, PARK_S)
            answer_s.append(took)
            seen += [woke] if right else []
            wrong += not right
    return {
        "asks": n,
        "wake": latency(seen, 50, 95, 99),
        "answer": latency(answer_s),
        "wrong": wrong,
    }


def _viewer(port: int, cookie: str, ready: threading.Barrier, heard: list, stop) -> None:
    """One stream on a raw connection: (time, todo ids) of each ``event: team``."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as link:
        link.sendall(
            f"GET /live/?want=counts HTTP/1.0\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        event, told = "", False
        for at, raw in httpbench.lines(link, stop.is_set):
            line = raw.decode("utf-8", "replace")
            if line.startswith("event:"):
                event = line[6:].strip()
                if event == "ready" and not told:
                    told = True
                    ready.wait(timeout=60)
            elif line.startswith("data:") and event == "team":
                heard.append((at, json.loads(line[5:]).get("todos", [])))


def stream(server, endpoint, person, viewers: int, n: int) -> dict:
    from switchboard.queues import transitions
    from switchboard.queues.transitions import Actor

    agent, cookie = Actor.agent(endpoint), seed.session_cookie(person.username)
    ready, stop = threading.Barrier(viewers + 1), threading.Event()
    heard: list[list] = [[] for _ in range(viewers)]
    for v in range(viewers):
        args = (server.port, cookie, ready, heard[v], stop)
        threading.Thread(target=_viewer, args=args, daemon=True).start()
    ready.wait(timeout=120)  # every stream watches the team
    asked = {}
    try:
        for i in range(n):
            todo, _ = transitions.create_todo(agent, title=f"question {i} for {viewers}")
            seq = transitions.claim(agent, todo.id).attempt_seq
            time.sleep(QUIET_S)
            transitions.release(agent, todo.id, attempt_seq=seq, question="Which one?")
            asked[todo.id] = time.time()
            time.sleep(GAP_S)
        time.sleep(2.0)  # the last ones' updates
    finally:
        stop.set()
    seen, missed = [], 0
    for events in heard:
        for todo_id, committed in asked.items():
            first = next((at for at, ids in events if at >= committed and todo_id in ids), None)
            seen += [] if first is None else [first - committed]
            missed += first is None
    return {
        "viewers": viewers,
        "questions": n,
        "fresh": latency(seen, 50, 95, 99),
        "missed": missed,
    }


def run_section(ctx) -> dict:
    from django.contrib.auth import get_user_model

    from switchboard.queues.models import Endpoint

    person = get_user_model().objects.get(username="bench")
    endpoint_id, token = seed.vend("bench-asker")
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    log_path, cap = db.RESULTS / f"ask-server-{ctx.stamp}.log", max(ctx.args.ask_viewers) + 8
    with httpbench.Server(log_path, SWITCHBOARD_BOARD_STREAMS_PER_USER=str(cap)) as server:
        w = wake(server, endpoint, token, person, ctx.args.ask_answers)
        log(f"ask: wake p95 {w['wake']['p95_ms']} ms over {w['wake']['n']}")
        streams = []
        for viewers in ctx.args.ask_viewers:
            streams.append(s := stream(server, endpoint, person, viewers, ctx.args.ask_questions))
            log(f"ask: {viewers} viewers, question fresh p95 {s['fresh']['p95_ms']} ms")
    note = {"wake": w, "streams": streams, "target": TARGET}
    return note | {"server": server.settings | server.log_summary()}


def met(note: dict) -> dict:
    w, t = note["wake"], note["target"]
    woke = w["wake"]["n"] == w["asks"] and (w["wake"]["p95_ms"] or 1e9) <= t["wake_p95_ms"]
    return {"wake": woke, "stream": all(_fresh(s, t) for s in note["streams"])}


def _fresh(stream: dict, target: dict) -> bool:
    """Every viewer heard every question, within the target at p95."""
    return not stream["missed"] and (stream["fresh"]["p95_ms"] or 1e9) <= target["stream_p95_ms"]


def render(note: dict) -> str:
    w, t, s, m = note["wake"], note["target"], note["server"], met(note)
    lat, p99, one = w["wake"], ("p50", "p95", "p99"), "{:.1f}"
    rows = [
        ["answer -> parked claim_next answered", "-", f"{lat['n']}/{w['asks']}"]
        + [pp(lat, *p99, spec=one), pp(lat, "max", spec=one)]
        + [f"<= {t['wake_p95_ms']:.0f}: {verdict(m['wake'])}"]
    ]
    for each in note["streams"]:
        fr, bar = each["fresh"], f"<= {t['stream_p95_ms']:.0f}: {verdict(_fresh(each, t))}"
        seen = f"{fr['n']}/{each['questions'] * each['viewers']}"
        row = ["question -> /live/ event: team", each["viewers"], seen]
        rows.append([*row, pp(fr, *p99, spec="{:.0f}"), pp(fr, "max", spec="{:.0f}"), bar])
    return "\n".join(
        [
            "Asking a person on one switchboard serve: an answer's commit -> the worker's parked "
            "claim_next answered with that todo; a question's commit -> each viewer's "
            f"/live/?want=counts update naming it; {db.code_line(note['git'])}",
            "",
            *table(["from -> to", "viewers", "seen", "p50/p95/p99 ms", "max ms", "target"], rows),
            f"The answer transition itself: p50/p95 {pp(w['answer'], spec=one)} ms; wrong todo "
            f"woken: {w['wrong']}; question fresh within target at every viewer count: "
            f"{verdict(m['stream'])}; {s['line']}; took {note['duration_s']:.0f} s",
        ]
    )
