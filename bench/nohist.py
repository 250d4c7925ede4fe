"""ADR-0039's reference: the product's claim_next, heartbeat and complete without attempt history.

The bar (docs/decisions/0039-attempt-history.md): throughput with attempt history >= 0.90 x
without. "Without" is the product's own statements with their attempt arms removed, built by
the same builders from the same arguments (``queues/sql/claim.py`` ``_claim``,
``queues/sql/close.py`` ``_close`` and ``_heartbeat``, keyword ``history=False``), so it cannot
drift from them: ``statements()`` first checks that those arguments rebuild each product
statement byte for byte, and fails if they do not. The todo's own columns move exactly as
they do in the product; no attempt is read (the snapshot-freshness check, the five prior
attempts), opened, closed or pruned, and the holder checks that read the open attempt go with
it (the bench's loop is an agent holding unfenced attempts, so they always pass in ours).

The nohist loop runs the product's own plans (``transitions.claim_next_plan`` and so on)
through ``queues.db.run``, with each of those statements swapped for its twin on the way
(``swapped``): the same Python, the same executor, the same prepared cursor.
"""

from __future__ import annotations

from queues.db import Atomic, Fetch, Plan, Statement


class Drifted(RuntimeError):
    """The bench's arguments no longer rebuild a product statement: re-read the builder."""


def statements() -> dict[str, Statement]:
    """Product statement name -> its twin without attempt history."""
    from queues import sql
    from queues.sql import claim, close

    held = "t.id = %(todo_id)s AND " + sql.SCOPE_ENDPOINT
    recipes = [
        (sql.CLAIM_NEXT, claim._claim, (sql.SCOPE_ENDPOINT, "SKIP LOCKED"), {}),
        (
            sql.HEARTBEAT_HELD_BY_AGENT,
            close._heartbeat,
            (held,),
            {"attempt_filter": close._HELD_BY_AGENT},
        ),
        (
            sql.CLOSE_HELD_BY_AGENT,
            close._close,
            (held,),
            {"attempt_filter": close._HELD_BY_AGENT, "holder_names": True},
        ),
    ]
    twins = {}
    for product, build, args, kwargs in recipes:
        positional = (product.name, *args, product.why)
        if build(*positional, **kwargs) != product:
            raise Drifted(f"bench/nohist.py's arguments no longer rebuild {product.name}")
        twins[product.name] = build(
            product.name + "_nohist", *args, product.why, history=False, **kwargs
        )
    return twins


def swapped[T](plan: Plan[T], twins: dict[str, Statement]) -> Plan[T]:
    """``plan`` with each statement that has a twin swapped for it. A statement without one
    that touches todo_attempts is an error: the plan changed what it runs, and the nohist
    loop would measure history after all."""
    value, error = None, None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(value)
        except StopIteration as stop:
            return stop.value
        if isinstance(step, Atomic):
            step = Atomic(swapped(step.plan, twins))
        elif step.statement.name in twins:
            step = Fetch(twins[step.statement.name], step.params)
        elif "todo_attempts" in step.statement.text:
            raise Drifted(f"{step.statement.name} reads attempts and has no nohist twin")
        try:
            value, error = (yield step), None
        except Exception as exc:  # noqa: BLE001 - thrown back into the plan, as db.run does
            value, error = None, exc
