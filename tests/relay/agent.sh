#!/bin/sh
# A stand-in for an agent CLI, run by `switchboard relay` in tests/test_relay.py: one attempt
# per process, told what to do by STUB_MODE and writing what it saw under STUB_OUT.
set -eu

out="${STUB_OUT:?STUB_OUT names the folder the test reads}"
seq="${SWITCHBOARD_ATTEMPT_SEQ:?run me under switchboard relay}"
todo="$SWITCHBOARD_TODO_ID"

# What the relay handed over, for the test to assert on.
{
    env | grep '^SWITCHBOARD_' | sort
    if [ -n "${SWITCHBOARD_TOKEN:-}" ]; then echo "TOKEN_LEAKED=yes"; fi
} > "$out/env-$todo-$seq"
# The pid file appears whole (written aside, then renamed): a test reading it as soon as it
# exists must never read it empty.
note_pid() {
    echo "$$" > "$out/.pid-$todo-$seq"
    mv "$out/.pid-$todo-$seq" "$out/pid-$todo-$seq"
}
# What this command can read of its parent's (the relay's) environment.
cat "/proc/$PPID/environ" > "$out/parent-environ-$todo-$seq" 2>/dev/null || true
cp "$SWITCHBOARD_CONTEXT_FILE" "$out/context-$todo-$seq.json"
cp "$SWITCHBOARD_CONTEXT_MARKDOWN" "$out/context-$todo-$seq.md"

case "${STUB_MODE:-succeed}" in
succeed)
    if [ "${STUB_READ_STDIN:-}" = 1 ]; then cat > "$out/stdin-$todo-$seq"; fi
    echo "working on todo $todo, attempt $seq"
    printf '{"done_by_attempt": %s, "todo": %s}\n' "$seq" "$todo" > "$SWITCHBOARD_RESULT_FILE"
    echo "attempt $seq read its context and did the work" > "$SWITCHBOARD_SUMMARY_FILE"
    echo "https://ci.example.com/runs/$todo-$seq" > "$SWITCHBOARD_ARTIFACT_FILE"
    exit 0
    ;;
ask)
    # Asks a person: the question the test wrote to STUB_QUESTION, copied to the file the
    # relay names for it (STUB_QUESTION_AS: json, the default, or text; none without
    # STUB_QUESTION), then the exit status that asks (STUB_EXIT, else 79).
    if [ -n "${STUB_QUESTION:-}" ]; then
        if [ "${STUB_QUESTION_AS:-json}" = text ]; then
            cp "$STUB_QUESTION" "$SWITCHBOARD_QUESTION_TEXT_FILE"
        else
            cp "$STUB_QUESTION" "$SWITCHBOARD_QUESTION_FILE"
        fi
    fi
    echo "attempt $seq needs a person's decision"
    exit "${STUB_EXIT:-79}"
    ;;
split)
    # Splits its todo: the children the test wrote to STUB_CHILDREN (none without it), then
    # the exit status that splits (80). A child (its title starts "child") just completes.
    case "$(grep -o '"title": *"[^"]*"' "$SWITCHBOARD_CONTEXT_FILE" | head -1)" in
    *'"child'*)
        echo "did $todo" > "$SWITCHBOARD_SUMMARY_FILE"
        exit 0
        ;;
    esac
    if grep -q '"children": \[\]' "$SWITCHBOARD_CONTEXT_FILE" || ! grep -q '"children"' "$SWITCHBOARD_CONTEXT_FILE"; then
        if [ -n "${STUB_CHILDREN:-}" ]; then cp "$STUB_CHILDREN" "$SWITCHBOARD_CHILDREN_FILE"; fi
        echo "splitting $todo"
        exit 80
    fi
    echo "merged the children of $todo" > "$SWITCHBOARD_SUMMARY_FILE"
    exit 0
    ;;
escapes)
    # A command echoing todo text that drives a terminal: a title change and colours.
    printf 'before \033]0;owned\007\033[31mred\033[0m after\n'
    exit 0
    ;;
exit)
    # Output only: the relay builds the summary from the last lines.
    echo "step 1: checked out"
    echo "step 2: the build broke" >&2
    exit "${STUB_EXIT:?}"
    ;;
hang)
    # Until stopped: a TERM is noted and obeyed (exiting 0, which must not count as done).
    trap 'echo "got SIGTERM" > "$out/term-$todo-$seq"; exit 0' TERM
    note_pid
    echo "hanging"
    sleep 60 &
    wait $!
    echo "not stopped" > "$out/woke-$todo-$seq"
    ;;
stubborn)
    # Ignores SIGTERM (so does its sleep, which inherits the disposition): needs SIGKILL.
    trap '' TERM
    note_pid
    echo "ignoring SIGTERM"
    sleep 60
    echo "not stopped" > "$out/woke-$todo-$seq"
    ;;
together)
    # Waits for STUB_TOGETHER attempts to be running at once: proof of concurrency without
    # timing anything (alone, it gives up after 15 s and fails). The start file appears only
    # once it holds its time (written aside, then renamed): a redirection creates the file
    # before date runs, and another run could see it, end, and stamp its end first.
    date +%s.%N > "$out/.start-$todo"
    mv "$out/.start-$todo" "$out/start-$todo"
    i=0
    while [ "$(ls "$out" | grep -c '^start-')" -lt "${STUB_TOGETHER:?}" ]; do
        i=$((i + 1))
        if [ "$i" -gt 150 ]; then echo "alone" >&2; exit 1; fi
        sleep 0.1
    done
    date +%s.%N > "$out/end-$todo"
    printf '{"together": %s}\n' "$STUB_TOGETHER" > "$SWITCHBOARD_RESULT_FILE"
    exit 0
    ;;
gate)
    # Until the test says go (the file "go"), then done: the test chooses the moment the
    # report goes out (into a database outage, say). Alone, it gives up after 60 s.
    note_pid
    i=0
    while [ ! -e "$out/go" ]; do
        i=$((i + 1))
        if [ "$i" -gt 600 ]; then echo "never told to go" >&2; exit 1; fi
        sleep 0.1
    done
    printf '{"gated": %s}\n' "$todo" > "$SWITCHBOARD_RESULT_FILE"
    exit 0
    ;;
*)
    echo "unknown STUB_MODE" >&2
    exit 2
    ;;
esac
