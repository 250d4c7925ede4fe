"""The demo's script: which simulated agents exist (one ``Role`` an endpoint), the todos they
get and what they say about them, each todo's fate (most complete; some fail, are retried or
dead-lettered; some workers die mid-lease or hang and are fenced out), and how an ``Agent``
acts a claimed todo's fate out. Half the agents claim with a fence, two in three with a
claimant label. The engine (``engine``) runs the agents; this module only says what they do.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from switchboard.client import Client, Job, SwitchboardError
from switchboard.demo.options import Options

# How each demo todo plays out. The first todos seeded take every fate once, so even a short
# run shows all of them; after that they are drawn with these weights.
FATES: dict[str, int] = {
    "complete": 45,  # worked and completed
    "flaky": 14,  # fails once (retryable), completes on the retry
    "doomed": 7,  # max_attempts 2 and fails every time: a dead letter
    "poison": 5,  # fails with retryable: false: dead-lettered at once
    "abandon": 12,  # the worker dies mid-lease; the next claimer (or the sweeper) takes over
    "zombie": 9,  # a worker hangs, is replaced, and its late call is refused (fenced out)
    "release": 8,  # handed back without a verdict, then completed by someone else
}
# For todos the demo did not create: mostly done, never deliberately killed.
FOREIGN_FATES: dict[str, int] = {"complete": 8, "flaky": 2, "release": 1}


@dataclass(frozen=True, slots=True)
class Role:
    """One kind of agent: its endpoint, the todos it gets and what it says about them."""

    agent_id: str
    name: str
    todos: tuple[tuple[str, str], ...]  # (title, body) templates
    done: tuple[str, ...]  # completion summaries
    failed: tuple[str, ...]  # retryable failure summaries
    hopeless: tuple[str, ...]  # summaries of a failure not worth retrying
    artifacts: tuple[str, ...]  # https:// or mcp:// templates
    result: Callable[[random.Random], dict]


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        test=rng.choice(
            ["test_login", "test_checkout_total", "test_refund_webhook", "test_csv_export"]
        ),
        incident=rng.randint(4380, 4460),
        issue=rng.randint(2100, 2400),
        build=rng.randint(4400, 4999),
        pr=rng.randint(1100, 1300),
        n=rng.randint(2, 9),
        pages=rng.randint(90, 180),
        minutes=rng.randint(12, 95),
        sha=f"{rng.getrandbits(28):07x}",
        hour=f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",
    )


ROLES: tuple[Role, ...] = (
    Role(
        agent_id="ci-fixer",
        name="CI fixer",
        todos=(
            (
                "triage flaky test {test}",
                "{test} fails about 1 run in {n}0 on main since Tuesday (build {build}). "
                "Find the cause, or quarantine it and open a ticket.",
            ),
            ("fix the failing build on main", "Build {build} went red after PR #{pr} merged."),
            (
                "bisect the slowdown in the API test suite",
                "The suite went from 4 to {n} minutes between builds 4400 and {build}.",
            ),
            ("bump pytest and fix the fallout", "Dependabot PR #{pr}; {n} tests error on it."),
        ),
        done=(
            "fixed: {test} waited on a stale session cookie; added an explicit wait",
            "reverted {sha}, which broke the fixture order; build {build} is green",
            "quarantined {test} and opened issue #{issue} with the three failing seeds",
        ),
        failed=(
            "pytest exited 1: {n} failures in test_api.py",
            "could not reproduce in 50 runs; the runner image may differ from CI's",
            "timed out after 20 minutes waiting for a build runner",
        ),
        hopeless=("the branch of PR #{pr} was deleted; nothing left to build",),
        artifacts=("https://ci.example.com/builds/{build}", "mcp://github/acme/shop/pulls/{pr}"),
        result=lambda rng: {
            "tests_run": rng.randint(380, 460),
            "failures": 0,
            "commit": f"{rng.getrandbits(28):07x}",
        },
    ),
    Role(
        agent_id="docs-bot",
        name="Docs bot",
        todos=(
            ("rebuild docs", "Rebuild the docs site from main and publish the preview."),
            ("regenerate the API reference", "The OpenAPI document changed in PR #{pr}."),
            ("fix broken links in the user guide", "The link checker found {n} dead links."),
            (
                "translate the quick start into German",
                "Keep the commands as they are; translate the prose only.",
            ),
        ),
        done=(
            "rebuilt {pages} pages; 0 warnings",
            "fixed {n} links; {n} pointed at the old /v1/ paths",
            "regenerated the reference: {n} endpoints changed",
        ),
        failed=(
            "mkdocs build failed: {n} broken cross-references",
            "the preview upload was refused (HTTP 503); try again later",
        ),
        hopeless=("the docs source folder is gone from main (moved in PR #{pr}?)",),
        artifacts=("https://docs.example.com/preview/{sha}/", "mcp://drive/docs/build-{build}.log"),
        result=lambda rng: {"pages": rng.randint(90, 180), "warnings": 0},
    ),
    Role(
        agent_id="scribe",
        name="Incident scribe",
        todos=(
            (
                "summarise incident {incident}",
                "Pager alert at {hour} UTC; elevated 5xx on checkout. Summarise for the "
                "status page and list follow-ups.",
            ),
            (
                "draft the postmortem for incident {incident}",
                "Timeline, impact, root cause, follow-ups. Blameless.",
            ),
            (
                "collect the timeline for the {hour} pager alert",
                "From the on-call channel and the deploy log.",
            ),
        ),
        done=(
            "summary drafted: {minutes} min of elevated 5xx after a config push; {n} follow-ups",
            "postmortem drafted; root cause: connection pool exhausted by a retry storm",
        ),
        failed=(
            "the log archive timed out (exit 124) after 300 s",
            "the on-call channel export was empty; retrying with a wider window",
        ),
        hopeless=("incident {incident}'s logs are past retention; nothing left to summarise",),
        artifacts=(
            "mcp://drive/incidents/{incident}-summary.md",
            "https://status.example.com/incidents/{incident}",
        ),
        result=lambda rng: {
            "duration_minutes": rng.randint(12, 95),
            "follow_ups": rng.randint(1, 5),
        },
    ),
    Role(
        agent_id="triage",
        name="Issue triage",
        todos=(
            ("triage issue #{issue}: login loop on Safari", "Reported by three customers today."),
            ("label this week's new issues", "{n}0 new issues since Monday."),
            ("dedupe the bug reports about CSV export", "Probably all one bug; link them."),
        ),
        done=(
            "labelled {n}0 issues, closed {n} duplicates",
            "reproduced on Safari 17; assigned to web, linked issue #{issue}",
        ),
        failed=("the issue tracker answered 429 (rate limited) {n} times; backing off",),
        hopeless=("permission denied on acme/billing; this needs a human",),
        artifacts=("https://github.com/acme/shop/issues/{issue}",),
        result=lambda rng: {"labelled": rng.randint(5, 40), "duplicates": rng.randint(0, 6)},
    ),
)


def role_for(agent_id: str) -> Role:
    """ci-fixer-2 (a fresh name beside a revoked ci-fixer) plays ci-fixer."""
    for role in ROLES:
        if agent_id == role.agent_id or agent_id.startswith(f"{role.agent_id}-"):
            return role
    raise KeyError(agent_id)


def draw(weights: dict[str, int], rng: random.Random) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def short(text: str, width: int = 50) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True, slots=True)
class Draft:
    """A todo about to be created: on ``agent_id``'s queue, sent by ``sender``."""

    agent_id: str
    sender: str
    arguments: dict
    fate: str


def draft_todo(rng: random.Random, agent_ids: list[str], fate: str | None = None) -> Draft:
    """One new todo with a realistic title, on a role's own queue or, now and then, sent
    there by another role's agent (an A2A send with ``to``); its fate drawn unless given."""
    fate = fate or draw(FATES, rng)
    agent_id = rng.choice(agent_ids)
    role = role_for(agent_id)
    title, body = (_fill(part, rng) for part in rng.choice(role.todos))
    arguments: dict = {"title": title, "body": body}
    if rng.random() < 0.35:
        arguments["priority"] = rng.choice([-10, 10, 20, 50])
    if fate == "doomed":
        arguments["max_attempts"] = 2
    sender = agent_id
    others = [other for other in agent_ids if other != agent_id]
    if others and rng.random() < 0.25:
        sender = rng.choice(others)
        arguments["to"] = agent_id
    return Draft(agent_id=agent_id, sender=sender, arguments=arguments, fate=fate)


# ---------------------------------------------------------------------------------------
# How an agent acts


class Stage(Protocol):
    """What an agent uses of the run it plays in (``engine.Demo``)."""

    options: Options
    stop: threading.Event
    poll_seconds: float

    def say(self, text: str) -> None: ...

    def fate_of(self, todo_id: int, rng: random.Random) -> str: ...


class Agent:
    """One simulated worker on one endpoint (several may share an endpoint and its token).
    Its "process" can die; it then comes back as a new run with a new claimant label."""

    def __init__(
        self, stage: Stage, *, index: int, agent_id: str, client: Client, seed: int
    ) -> None:
        self.stage = stage
        self.agent_id = agent_id
        self.client = client
        self.role = role_for(agent_id)
        self.rng = random.Random(seed)
        self.index = index
        # Fixed per agent rather than drawn, so every run of the demo has fenced and unfenced
        # workers, and labelled and unlabelled ones.
        self.fence = index % 2 == 0
        self.style = index % 3  # 0: a harness label, 1: a host label, 2: no label
        self.run_no = self.rng.randint(10, 90)
        self.stop = stage.stop
        self.options = stage.options

    @property
    def claimant(self) -> str | None:
        if self.style == 0:
            return f"harness/buildbox/{self.agent_id}/run-{self.run_no}"
        if self.style == 1:
            return f"k8s/{self.agent_id}-{self.index}/run-{self.run_no}"
        return None

    @property
    def who(self) -> str:
        return f"{self.agent_id:<9} {self.claimant or f'worker {self.index}'}"

    def say(self, text: str) -> None:
        self.stage.say(f"{self.who}: {text}")

    def text(self, templates: tuple[str, ...]) -> str:
        return _fill(self.rng.choice(templates), self.rng)

    def claim_next(self) -> Job | None:
        claimed = self.client.claim_next(
            wait_seconds=self.stage.poll_seconds,
            lease_seconds=self.options.lease,
            require_fence=self.fence,
            claimant=self.claimant,
        )
        if claimed.get("todo") is None:
            return None
        return Job(self.client, claimed)

    def work_one(self) -> None:
        job = self.claim_next()
        if job is None:
            return
        todo = job.todo
        if self.stop.is_set():  # claimed as the stop came: hand it straight back
            job.release(summary="demo stopping; handed back")
            return
        previous = max(job.prior_attempts, key=lambda a: a["seq"], default=None)
        if previous is not None and previous["died"]:
            by = previous["claimant"] or previous["endpoint"] or "a worker"
            self.say(f"took over #{todo['id']} from {by} ({previous['outcome']})")
        fate = self.stage.fate_of(todo["id"], self.rng)
        first_try = todo["failures"] == 0 and todo["attempt"] == 1
        if fate == "abandon" and todo["failures"] == 0:
            self.die(job)
        elif fate == "zombie" and todo["failures"] == 0:
            self.stall(job)
        elif fate == "release" and first_try:
            self.finish(job, "release")
        elif fate in ("doomed", "poison") or (fate == "flaky" and todo["failures"] == 0):
            self.finish(job, "fail", retryable=fate != "poison")
        else:
            self.finish(job, "complete")

    # --- acts ---

    def finish(self, job: Job, verdict: str, *, retryable: bool = True) -> None:
        """Work a while with heartbeats running (the client's Job does them), then end."""
        todo = job.todo
        try:
            with job:
                if self.stop.wait(self.rng.uniform(0.5, 1.5) * self.options.pace):
                    job.release(summary="demo stopping; handed back")
                    return
                if verdict == "complete":
                    job.complete(**self.completion(job))
                    self.say(f"completed #{todo['id']} {short(todo['title'])}")
                elif verdict == "release":
                    job.release(summary="handing back: this runner has no credentials for staging")
                    self.say(f"released #{todo['id']} (no credentials here)")
                else:
                    summary = self.text(self.role.failed if retryable else self.role.hopeless)
                    done = job.fail(
                        summary=summary,
                        result={"exit_code": 1 if retryable else 2},
                        retryable=retryable,
                    )
                    self.say(f"failed #{todo['id']}: {short(summary, 60)}{_after_fail(done)}")
        except SwitchboardError as exc:
            if exc.code != "conflict":
                raise
            # The lease lapsed between heartbeats and another worker (or the sweeper) took it.
            self.say(f"lost #{todo['id']}: {exc.status} {exc.code}")

    def completion(self, job: Job) -> dict:
        # What earlier attempts left is what a real agent reads first; say it was heeded.
        previous = max(job.prior_attempts, key=lambda a: a["seq"], default=None)
        note = ""
        if previous is not None and previous["died"]:
            note = "picked up after the last worker died; "
        elif previous is not None and previous["outcome"] == "failed":
            note = "second try, after the last attempt failed; "
        arguments: dict = {
            "summary": note + self.text(self.role.done),
            "result": self.role.result(self.rng),
        }
        if self.rng.random() < 0.6:
            arguments["artifact"] = self.text(self.role.artifacts)
        return arguments

    def die(self, job: Job) -> None:
        """Claim, maybe heartbeat once, then vanish: no heartbeats, no verdict. The lease
        lapses; the sweeper reaps it, or the next claimer takes it over as lease_expired."""
        if self.rng.random() < 0.5 and not self.stop.wait(min(1.0, self.options.lease / 3)):
            job.heartbeat()
        self.say(f"died holding #{job.todo['id']}; its lease lapses in {self.options.lease}s")
        self.restart(after=self.options.pace)

    def stall(self, job: Job) -> None:
        """A hung worker: it stops heartbeating, its harness starts a replacement that
        takes the todo over, and then the hung worker wakes and tries to finish. Its
        lease token (or attempt_seq, unfenced) is stale, so the server refuses it: 409."""
        todo_id = job.todo["id"]
        stale = self.claimant or "the hung run"
        self.say(f"hung on #{todo_id} (no heartbeats){' holding a fence' if self.fence else ''}")
        # Past the lease by the database's clock, with a margin for the web server's.
        if self.stop.wait(self.options.lease + 1.5):
            self._release_quietly(job)
            return
        self.restart(after=0)
        replacement: Job | None = None
        try:
            # The replacement fences whatever its predecessor did: it knows a stale twin of
            # itself may still be out there.
            claimed = self.client.claim(
                todo_id=todo_id,
                lease_seconds=self.options.lease,
                require_fence=True,
                claimant=self.claimant,
            )
            replacement = Job(self.client, claimed)
            self.say(f"replacement took over #{todo_id} from {stale}")
        except SwitchboardError as exc:
            if exc.code != "conflict":
                raise
            self.say(f"#{todo_id} was already taken over by another worker")
        try:
            job.complete(summary="finished late", result={"late": True})
            self.say(f"stale {stale} completed #{todo_id} late (nobody had taken over)")
        except SwitchboardError as exc:
            if self.fence:
                self.say(
                    f"stale {stale} fenced out of #{todo_id}: {exc.status} {exc.code} "
                    "(its lease token is stale)"
                )
            else:
                self.say(
                    f"stale {stale} refused on #{todo_id}: {exc.status} {exc.code} "
                    "(its attempt_seq is stale; it held no fence)"
                )
        if replacement is not None:
            self.finish(replacement, "complete")

    def restart(self, *, after: float) -> None:
        """The agent's process is gone; its harness starts a new run."""
        self.run_no += 1
        self.stop.wait(after)

    def _release_quietly(self, job: Job) -> None:
        try:
            job.release(summary="demo stopping; handed back")
        except (SwitchboardError, OSError):
            pass  # the lease lapses on its own


def _after_fail(done: dict) -> str:
    todo = done["todo"]
    if todo["state"] == "dead":
        return f" -> dead letter after {todo['failures']} failure(s)"
    return " -> retry scheduled"
