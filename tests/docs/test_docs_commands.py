"""Every command the documentation shows works as written, or is listed here as not run, with why.

The commands are read from the pages (testkit/doc_commands.py says what counts as one). Each
must be in RUN or NOT_RUN: a command in neither fails the test, so a new documented command is
neither skipped nor run unnoticed; an entry no page holds any more fails it too. Historical
commands (a `sh historical` block: run for a figure of an older version, kept with it) are
neither listed nor run; their section must name the commit and the date. The commands of
RUN are run with bash from the repository root, in this environment (the quick start's
`.venv`), with these adaptations only:

- paths under /tmp/ go to the test's own temporary directory;
- a command that needs a running server gets the address of one the test starts on a free
  port with the quick start's defaults (1 worker, info logs): `server` names the flag,
  `address` the address written in the command that the test's replaces, or `host` puts it
  last as ghz's host argument;
- a command that calls the HTTP/JSON gateway gets the address of one the test starts in front
  of its server (testkit.http_gateway): `gateway` names the address written in the command;
- ghz is found where the test command's set-up installs it (.ci/tools/go/bin, put first on
  the PATH, as docs/load-testing.md tells a reader of this repository to do), and a ghz
  command's summary must count every call OK (ghz exits 0 whatever the calls' status);
- a `basra-rules serve` command (its `NAME=value` settings in its environment) runs on a free
  port until its health check answers SERVING, then is stopped with SIGTERM and must exit 0;
- a long command gets the extra arguments of its entry (a shorter run; the programs let the
  last flag win) or, for ghz, which refuses a flag given twice, its `shorter` replacements,
  and a command whose input another one writes runs after that one (`after`).

Lines of `# ` right after a command in a page are what it prints; the output must be that,
also when the command runs first for another one (`after`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit import harness
from testkit.doc_commands import (
    ENVIRONMENT_PROGRAMS,
    HISTORICAL,
    REPO,
    SETTING,
    SHELL_TAGS,
    blocks,
    commands,
    pages,
    programs,
)
from testkit.ghz_tool import GO_BIN
from testkit.http_gateway import gateway
from testkit.ports import LOOPBACK, reserved_port

COMMAND_SECONDS = 240.0


@dataclass(frozen=True)
class Run:
    """Run the command as written (with the adaptations of the module docstring)."""

    server: str | None = None
    """The flag that takes the address of the test's server (None: needs no server)."""
    extra: tuple[str, ...] = ()
    """Arguments appended for a shorter run."""
    after: tuple[str, ...] = ()
    """Commands run first, in the same temporary directory (they write this one's input)."""
    address: str | None = None
    """The address written in the command, replaced by the test's server (None: none written)."""
    host: bool = False
    """Whether the test's server address goes last as a plain argument (ghz's host)."""
    shorter: tuple[tuple[str, str], ...] = ()
    """(written, replacement) pairs for a shorter run, for a program refusing a repeated flag."""
    gateway: str | None = None
    """The HTTP/JSON gateway's address written in the command, replaced by the test's gateway
    in front of its server (None: no gateway)."""


@dataclass(frozen=True)
class Serve:
    """A `basra-rules serve` command: start it on a free port, see it serve, stop it."""


@dataclass(frozen=True)
class NotRun:
    """A command this test does not run, and why."""

    why: str


SHORT_LOAD = ("-n", "300")
SHORT_DEFAULTS = ("--runs", "1", "--rounds", "1", "--calls", "200")
SHORT_LOAD_BENCH = ("--rounds", "1", "--calls", "200", "--paced-seconds", "0.5")
# One overload phase pair, one server, one RPC: the program runs end to end in about 20 s.
SHORT_OVERLOAD = (
    *("--variants", "sync", "--rpcs", "Apply"),
    *("--runs", "1", "--seconds", "1", "--factors", "4"),
)
OVERLOAD_AGAIN = (
    "benchmarks.overload again (minutes of both cores); its first command runs, shortened"
)
BUDGETS = (
    "nice -n 10 .venv/bin/python -m benchmarks.bot_budgets --budgets 1:60 4:500 8:1100 16:2200 "
    "32:5000 --seeds 200 --procs 2 --matches 20 --warm 5 --cpu 1 --json-out /tmp/budgets400.json "
    "--png /tmp/bot_budgets400.png"
)
CLUSTER_CAPACITY = (
    "starts a test cluster of its own (root) and ramps a gateway's matches for minutes of both "
    "cores; tests/cluster runs the chart on the same cluster"
)
OVERLOAD_GHZ = (
    "ghz offering 2x and 4x a two-worker server's capacity, three runs (minutes of both cores); "
    "benchmarks.overload's first command runs here, shortened"
)
# ghz against the test's server: 300 calls, or the command's own shorter run.
GHZ = Run(host=True, extra=SHORT_LOAD)
IMAGE_TEST = (
    "run by tests/deploy/test_deploy_image.py, which reads it from docs/deploy.md and runs it "
    "against a Docker engine of its own (no bridge: the host's network, free ports)"
)
DOCKER = NotRun(IMAGE_TEST)
LOCK = NotRun(
    "rewrites the committed lock files to that day's newest versions; "
    "tests/deploy/test_deploy_lock.py checks that each lock satisfies pyproject.toml and "
    "records the command this one runs"
)
FUZZ = NotRun(
    "tests/fuzz at thousands of examples per property takes many minutes; the test command "
    "runs the same tests at 60"
)
FUZZ_LONG = "nice -n 10 .venv/bin/python -m testkit.fuzz_long --runs 1000000 --work /tmp/fuzz-long"

# docs/getting-started.md, "Over HTTP/JSON, with curl": a match by curl through the gateway,
# each step after the ones whose files it reads.
HTTP_GATEWAY = "localhost:8080"
CURL_NEW_MATCH = (
    "curl -s localhost:8080/basra.v1.RulesService/NewMatch -H 'Content-Type: application/json' "
    """-d '{"seed": "ZG9jcw==", "labels": ["ann", "bob"]}' > /tmp/new.json"""
)
CURL_APPLY = (
    """jq -c '{state, action: {seat: 0, card: "8S"}, expectedSeq: 0}' /tmp/new.json | curl -s """
    "localhost:8080/basra.v1.RulesService/Apply -H 'Content-Type: application/json' "
    "-H 'Grpc-Timeout: 2S' -d @- > /tmp/next.json"
)
CURL_STALE = (
    """jq -c '{state, action: {seat: 0, card: "7C"}, expectedSeq: 0}' /tmp/next.json | curl -s """
    "-o /tmp/refusal.json -w '%{http_code}\\n' localhost:8080/basra.v1.RulesService/Apply "
    "-H 'Content-Type: application/json' -d @-"
)

COMMANDS: dict[str, Run | Serve | NotRun] = {
    # README.md and docs/getting-started.md (the quick start, trying it, a client in C++)
    "bash .ci/serve": NotRun(
        "the quick start's server on the fixed ports 50051 and 9464, which its set-up "
        "re-installs .venv for; checked from a fresh clone before a release"
    ),
    "bash .ci/serve > /tmp/basra-serve.log 2>&1 &": NotRun(
        "the same server line, in the background"
    ),
    "bash .ci/test": NotRun("the test command itself: it runs this test"),
    # docs/http.md (the HTTP/JSON port)
    "bash deploy/gateway/build": Run(),
    ".cache/gateway/basra-gateway --listen 127.0.0.1:8080 --backend 127.0.0.1:50051 "
    "--service-config deploy/grpc-service-config.json": NotRun(
        "serves until stopped, on the fixed port 8080; testkit.http_gateway starts the same "
        "binary with the same flags (a free port) for every test of tests/http"
    ),
    'curl -s -H \'Content-Type: application/json\' -d \'{"seed": "aGVsbG8=", "labels": '
    '["north", "south"]}\' http://127.0.0.1:8080/basra.v1.RulesService/NewMatch': NotRun(
        "needs the gateway above; tests/http/test_http_play.py makes the same calls with curl"
    ),
    # BENCHMARKS.md, "The cluster tests"
    ".venv/bin/python -m pytest -q -s -p no:xdist tests/cluster": NotRun(
        "the test command runs tests/cluster itself, after this test's run"
    ),
    ".venv/bin/python -m pytest -q -s -p no:xdist tests/cluster/test_cluster_rollouts.py": NotRun(
        "one module of tests/cluster, which the test command runs whole"
    ),
    (
        ".venv/bin/python -m pytest -q -s -p no:xdist tests/cluster/test_cluster_node_faults.py"
    ): NotRun("one module of tests/cluster, which the test command runs whole"),
    ".venv/bin/python -m pytest -q -s -p no:xdist tests/cluster/test_cluster_http.py": NotRun(
        "one module of tests/cluster, which the test command runs whole"
    ),
    (
        "BASRA_PACE_ROLLOUTS=20 .venv/bin/python -m pytest -q -s -p no:xdist "
        "tests/cluster/test_cluster_rollout_pace.py"
    ): NotRun("one module of tests/cluster with 20 rollouts; the test command runs it with 3"),
    ".venv/bin/python -m pytest -q -s -p no:xdist tests/cluster/test_cluster_drain.py": NotRun(
        "one module of tests/cluster, which the test command runs whole"
    ),
    ".venv/bin/python -m pytest -q -s -p no:xdist tests/cluster/test_cluster_node_loss.py": NotRun(
        "one module of tests/cluster, which the test command runs whole"
    ),
    "bash .ci/setup dev": NotRun("the test command's own set-up, which it runs first"),
    "GOCACHE=$(mktemp -d) GOMODCACHE=$(mktemp -d) CI=true bash .ci/run": NotRun(
        "the whole test command with empty Go caches (about 29 minutes): it runs this test"
    ),
    # docs/integration.md: the Java client's tests, which the test command runs itself
    "(cd examples/java && mvn -q -B verify)": NotRun(
        "the test command runs exactly this after pytest (.ci/test)"
    ),
    "bash .ci/serve --workers 2 --log-level warning": NotRun(
        "the quick start's server line with two flags; the same server is run below as "
        "`.venv/bin/basra-rules serve --workers 2 --log-level warning`"
    ),
    ".venv/bin/basra-rules play": Run(server="--target"),
    ".venv/bin/basra-rules load deploy/ghz/apply.json": Run(server="--host", extra=SHORT_LOAD),
    ".venv/bin/grpcurl -plaintext -d '{}' localhost:50051 basra.v1.RulesService/NewMatch": Run(
        address="localhost:50051"
    ),
    ".venv/bin/basra-rules verify docs/example-record.json": Run(),
    # docs/getting-started.md, "Over HTTP/JSON, with curl"
    # ("bash deploy/gateway/build" is docs/http.md's too, run above.)
    ".cache/gateway/basra-gateway --listen 127.0.0.1:8080 --backend localhost:50051 &": NotRun(
        "the fixed port 8080: testkit.http_gateway starts the same binary with --listen "
        "127.0.0.1:0 --backend in front of this test's server, and the curl commands below go "
        "through it"
    ),
    CURL_NEW_MATCH: Run(gateway=HTTP_GATEWAY),
    "jq -c '{toMove: .state.toMove, seq: .state.seq, floor: .state.floor}' /tmp/new.json": Run(
        after=(CURL_NEW_MATCH,)
    ),
    (
        "jq -c '{state, seat: 0}' /tmp/new.json | curl -s "
        "localhost:8080/basra.v1.RulesService/PlayerView -H 'Content-Type: application/json' "
        "-d @- | jq -c '.view | {hand, floor, deckSize, toMove}'"
    ): Run(gateway=HTTP_GATEWAY, after=(CURL_NEW_MATCH,)),
    CURL_APPLY: Run(gateway=HTTP_GATEWAY, after=(CURL_NEW_MATCH,)),
    (
        "jq -c '{seq: .state.seq, toMove: .state.toMove, seen: .seatEvents[1].events}' "
        "/tmp/next.json"
    ): Run(after=(CURL_NEW_MATCH, CURL_APPLY)),
    CURL_STALE: Run(gateway=HTTP_GATEWAY, after=(CURL_NEW_MATCH, CURL_APPLY)),
    "jq -c . /tmp/refusal.json": Run(after=(CURL_NEW_MATCH, CURL_APPLY, CURL_STALE)),
    "mkdir -p client/cpp": NotRun("the first line of the protoc recipe below, which writes it"),
    (
        "protoc -I proto --cpp_out=client/cpp --grpc_out=client/cpp "
        '--plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" basra/v1/rules.proto'
    ): NotRun("needs Debian's protoc and grpc_cpp_plugin, which the test command does not install"),
    ".ci/tools/node_modules/.bin/buf generate": NotRun(
        "needs the buf.gen.yaml the reader writes and the protoc plugins of the recipe above"
    ),
    ".venv/bin/basra-rules serve --help": Run(),
    "ghz --config deploy/ghz/apply.json": GHZ,
    "taskset -c 1 .venv/bin/python -m benchmarks.engine_bench --hands 10000": Run(
        extra=("--hands", "20", "--brute-samples", "200")
    ),
    ".venv/bin/python -m benchmarks.work_bound": Run(),
    (
        "BASRA_FUZZ_EXAMPLES=20000 BASRA_FUZZ_REPORT=/tmp/fuzz.json .venv/bin/python -m pytest "
        "-p no:cacheprovider tests/fuzz"
    ): FUZZ,
    ".venv/bin/python -m testkit.soak --duration 300 --rate 100 --tables 4 --signing": Run(
        extra=("--duration", "2")
    ),
    ".venv/bin/python -m testkit.soak --duration 120 --rate 100 --tables 4 --kill-every 6": Run(
        extra=("--duration", "3", "--kill-every", "1")
    ),
    "taskset -c 1 .venv/bin/python -m benchmarks.engine_bench --wide": Run(
        extra=("--matches", "5", "--cases", "200")
    ),
    "taskset -c 1 .venv/bin/python -m benchmarks.hot_path": Run(extra=("--repeats", "1")),
    ".venv/bin/python -m benchmarks.load_bench --defaults --runs 3": Run(extra=SHORT_DEFAULTS),
    "taskset -c 1 .venv/bin/python -m benchmarks.hot_path --tracing": Run(extra=("--repeats", "1")),
    ".venv/bin/python -m benchmarks.load_bench --defaults --tracing --runs 3": Run(
        extra=SHORT_DEFAULTS
    ),
    (".venv/bin/python -m testkit.fuzz --requests 1000000 --report /tmp/fuzz-in-process.json"): Run(
        extra=("--requests", "2000")
    ),
    (
        ".venv/bin/python -m testkit.soak --duration 3600 --workers 1 --metrics --rate 200 "
        "--tables 8 --sample-every 300"
    ): Run(extra=("--duration", "2", "--sample-every", "1")),
    # BENCHMARKS.md
    (
        "for i in 1 2 3; do .venv/bin/python -m benchmarks.load_bench --workers 1 2 --calls 6000 "
        "--json-out /tmp/run$i.json; done"
    ): NotRun(
        "three full load benchmarks (about 20 minutes of both cores); docs/load-testing.md's "
        "load_bench commands run here, shortened"
    ),
    (
        ".venv/bin/python -m benchmarks.load_bench --merge /tmp/run1.json /tmp/run2.json "
        "/tmp/run3.json"
    ): NotRun("reads the files of the loop above; the merge of two runs is run below"),
    (
        ".venv/bin/python -m benchmarks.overload --variants bare,sync --runs 3 "
        "--json /tmp/overload.json"
    ): Run(extra=SHORT_OVERLOAD),
    ".venv/bin/basra-rules serve --workers 2 --log-level warning": Serve(),
    ".venv/bin/python -m benchmarks.load_bench --defaults --runs 5 --rounds 4 --calls 4000": Run(
        extra=SHORT_DEFAULTS
    ),
    "taskset -c 1 .venv/bin/python -m benchmarks.hot_path --repeats 15": Run(
        extra=("--repeats", "1")
    ),
    "git worktree add /tmp/before main": NotRun(
        "adds a worktree to the reader's clone; the --baseline command is run here against this "
        "checkout itself"
    ),
    ("taskset -c 1 .venv/bin/python -m benchmarks.hot_path --baseline /tmp/before --rounds 5"): Run(
        extra=("--baseline", ".", "--rounds", "1", "--repeats", "1")
    ),
    (
        ".venv/bin/python -m benchmarks.overload --variants bare,sync --workers 1 --rpcs "
        "NewMatch,Apply,LegalMoves,PlayerView,Replay,SuggestMove --factors '' --json "
        "/tmp/capacity.json"
    ): NotRun(OVERLOAD_AGAIN),
    (
        ".venv/bin/python -m benchmarks.overload --variants bare,sync --workers 1 --rpcs "
        "SuggestMove --factors '' --json /tmp/capacity-suggest.json"
    ): NotRun(OVERLOAD_AGAIN),
    (
        ".venv/bin/python -m benchmarks.overload --variants sync/admission-limit=16,sync,"
        "sync/admission-limit=256,sync/admission-limit=0 --rpcs SuggestMove --factors 4 --json "
        "/tmp/bound.json"
    ): NotRun(OVERLOAD_AGAIN),
    (
        ".venv/bin/python -m benchmarks.overload --variants sync/admission-limit=16,"
        "sync/admission-limit=32,sync --rpcs SuggestMove,Apply --factors 4 --runs 2 --json "
        "/tmp/bound2.json"
    ): NotRun(OVERLOAD_AGAIN),
    (
        "flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.overload_ghz --runs 3 "
        "--variants sync/threads=2/switch=0.0005,sync/threads=8/switch=0.005 --rpcs "
        "SuggestMove,Apply --seconds 8"
    ): NotRun(OVERLOAD_GHZ),
    (
        "flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.overload_ghz --runs 3 "
        "--health-port --probe-period 0.05 --factors 2,4 --in-flight 300 --seconds 8"
    ): NotRun(OVERLOAD_GHZ),
    (
        "flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.overload_ghz --runs 3 "
        "--variants sync/pending=64,sync/pending=256,sync/pending=1024 --factors 2,4 "
        "--in-flight 300 --seconds 8"
    ): NotRun(OVERLOAD_GHZ),
    (
        "flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.overload_ghz --runs 3 "
        "--variants sync/pending=64,sync/admission-limit=100000/grpc-limit=64 --factors 4 "
        "--in-flight 300 --seconds 8"
    ): NotRun(OVERLOAD_GHZ),
    (
        "flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.cluster_capacity "
        "--json-out /tmp/cluster-capacity.json"
    ): NotRun(CLUSTER_CAPACITY),
    (
        "flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.cluster_capacity --modes "
        "batch --tick 0.05 --batch-steps 500,1000,1500,2000,2500,3000,4000,5000 --json-out "
        "/tmp/cluster-capacity-tick50.json"
    ): NotRun(CLUSTER_CAPACITY),
    (
        "flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.cluster_capacity --modes "
        "batch --tick 0.02 --batch-steps 500,1000,1500,2000,2500,3000,4000,5000 --json-out "
        "/tmp/cluster-capacity-tick20.json"
    ): NotRun(CLUSTER_CAPACITY),
    "nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --procs 2 --json-out /tmp/ladder.json": (
        Run(extra=("--seeds", "2"))
    ),
    (
        "nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --pair STRONG GREEDY 1000 --start "
        "1000 --procs 2 --json-out /tmp/ladder2.json"
    ): Run(extra=("--seeds", "2")),
    ".venv/bin/python -m benchmarks.bot_ladder --merge /tmp/ladder.json /tmp/ladder2.json": Run(
        after=(
            "nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --procs 2 --json-out "
            "/tmp/ladder.json",
            "nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --pair STRONG GREEDY 1000 "
            "--start 1000 --procs 2 --json-out /tmp/ladder2.json",
        )
    ),
    "taskset -c 1 .venv/bin/python -m benchmarks.bot_time": Run(
        extra=("--matches", "1", "--warm", "1")
    ),
    (
        "nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --pair STRONG GREEDY 1000 --nodes "
        "3200 --procs 2 --json-out /tmp/ladder3200.json"
    ): Run(extra=("--seeds", "2")),
    "taskset -c 1 .venv/bin/python -m benchmarks.bot_time --nodes 3200": Run(
        extra=("--matches", "1", "--warm", "1")
    ),
    ".venv/bin/python -m benchmarks.rpc_cpu --rounds 5 --json-out /tmp/rpc.json": Run(
        extra=("--rounds", "1", "--scale", "0.05")
    ),
    ".venv/bin/python -m benchmarks.http_engines --rounds 5 --json-out /tmp/http-engines.json": Run(
        extra=("--rounds", "1", "--calls", "100")
    ),
    ".venv/bin/python -m benchmarks.batch_bench --rounds 5 --json-out /tmp/batch.json": Run(
        extra=("--rounds", "1", "--items", "200")
    ),
    "nice -n 10 .venv/bin/python -m benchmarks.bot_round_ends --matches 150 --procs 2": Run(
        extra=("--matches", "2", "--procs", "1")
    ),
    BUDGETS: Run(
        extra=("--budgets", "1:60", "2:200", "--seeds", "2", "--matches", "1", "--warm", "1")
    ),
    (
        ".venv/bin/python -m benchmarks.bot_budgets --from-json /tmp/budgets400.json --png "
        "/tmp/bot_budgets400.png"
    ): Run(after=(BUDGETS,)),
    (
        ".venv/bin/python -m benchmarks.bot_budgets --from-json /tmp/budgets400.json --retime "
        "--cpu 1 --matches 20 --warm 5 --json-out /tmp/budgets400-retimed.json --png "
        "/tmp/bot_budgets400.png"
    ): Run(after=(BUDGETS,), extra=("--matches", "1", "--warm", "1")),
    ".venv/bin/python -m pytest -q -n 0 -s tests/deploy/test_deploy_image.py": NotRun(
        "the image test itself, which the test command runs (-s only shows its figures)"
    ),
    ".venv/bin/python -m pytest -q -s tests/service/test_service_hung_worker.py": NotRun(
        "the hung-worker tests themselves, which the test command runs (-s shows the figures)"
    ),
    "nice -n 5 .venv/bin/python -m pytest -q -n 0 -s tests/rollout --durations=30": NotRun(
        "the rolling-update tests themselves, which the test command runs (-s shows what each "
        "walk-through checked)"
    ),
    # RELIABILITY.md
    ".venv/bin/python -m testkit.blackhole --grpc-go --grpc-js": NotRun(
        "needs root (a network namespace, iptables in it); the Go and grpc-js clients are measured,"
        " not held"
    ),
    **{
        f".venv/bin/python -m testkit.clusterip_rollout --clients {kind}": NotRun(
            "20 rollouts, a minute and a half at 300 calls a second; "
            "tests/rollout/test_rollout_clusterip_pace.py runs a short form"
        )
        for kind in ("published", "plain", "no-retry")
    },
    ".venv/bin/python -m testkit.blackhole": NotRun(
        "needs root (a network namespace, iptables in it); tests/service/test_service_blackhole.py"
        " runs the same measurement"
    ),
    (
        ".venv/bin/python -m testkit.soak --duration 600 --rate 150 --tables 8 --seed 5 "
        "--json /tmp/soak.json"
    ): Run(extra=("--duration", "2")),
    (
        ".venv/bin/python -m testkit.soak --duration 120 --rate 100 --tables 4 --kill-every 6 "
        "--seed 2"
    ): Run(extra=("--duration", "3", "--kill-every", "1")),
    (
        ".venv/bin/python -m testkit.fuzz --requests 200000 --seed 20261207 --report "
        "/tmp/fuzz-in-process.json"
    ): Run(extra=("--requests", "2000")),
    (
        "BASRA_FUZZ_EXAMPLES=7200 BASRA_FUZZ_REPORT=/tmp/fuzz.json .venv/bin/python -m pytest "
        "-p no:cacheprovider tests/fuzz/test_fuzz_grpc.py"
    ): FUZZ,
    (
        "BASRA_HTTP_FUZZ_INPUTS=20000 BASRA_HTTP_FUZZ_SEED=20261207 "
        "BASRA_HTTP_FUZZ_REPORT=/tmp/http-fuzz.json .venv/bin/python -m pytest "
        "-p no:cacheprovider tests/fuzz/test_fuzz_http.py"
    ): NotRun("20,000 inputs take minutes; the test command runs the same test at 600"),
    FUZZ_LONG: Run(extra=("--runs", "14")),
    ".venv/bin/python -m testkit.fuzz_long --keep --work /tmp/fuzz-long": NotRun(
        "adds a long run's inputs to tests/fuzz/corpus, in the repository; the test command "
        "replays that corpus (tests/fuzz/test_fuzz_atheris.py)"
    ),
    (
        ".venv/bin/coverage run --data-file=/tmp/fuzz-long/coverage --source=engine,wire,service "
        "-m testkit.fuzz_inputs /tmp/fuzz-long/corpus && .venv/bin/coverage report "
        "--data-file=/tmp/fuzz-long/coverage"
    ): Run(after=(FUZZ_LONG,)),
    # docs/bot.md
    ".venv/bin/basra-rules play --bots strong greedy": Run(server="--target"),
    # docs/deploy.md
    "docker build -f deploy/Dockerfile -t basra-rules:0.1.0 .": NotRun(
        f"{IMAGE_TEST}, with the base named as in the offline build below"
    ),
    "deploy/python-base.sh /tmp/python-base.tar": NotRun(
        f"{IMAGE_TEST}; its tarball is cached in the checkout (.cache/)"
    ),
    "docker import /tmp/python-base.tar basra-python-base:trixie": DOCKER,
    (
        "docker build -f deploy/Dockerfile --build-arg PYTHON_IMAGE=basra-python-base:trixie "
        "-t basra-rules:0.1.0 ."
    ): DOCKER,
    "bash .ci/lock": LOCK,
    (
        "docker run --rm --name basra --read-only --tmpfs /tmp --tmpfs /var/run/basra/metrics "
        "--cap-drop ALL --security-opt no-new-privileges --user 10001:10001 --stop-timeout 30 "
        "-e BASRA_WORKERS=2 -e BASRA_METRICS_DIR=/var/run/basra/metrics -p 50051:50051 "
        "-p 9464:9464 -p 8080:8080 basra-rules:0.1.0"
    ): NotRun(
        f"{IMAGE_TEST}: -d and --network host for -p, the metrics volume a directory of the "
        "host (as an emptyDir is one of the node's)"
    ),
    (
        "docker run --rm --network container:basra --read-only --cap-drop ALL --security-opt "
        "no-new-privileges --user 10001:10001 --entrypoint /opt/basra-gateway/basra-gateway "
        "basra-rules:0.1.0 --listen=:8080 --backend=127.0.0.1:50051 "
        "--service-config=/opt/basra-gateway/grpc-service-config.json --max-body-bytes=4194304 "
        "--drain-seconds=3 --log-level=info"
    ): NotRun(
        f"{IMAGE_TEST}: --network host beside the server (its free ports in --listen and "
        "--backend), the flags of the chart's render"
    ),
    "kubectl apply -k overlays/prod": NotRun(
        "needs a cluster and the reader's own overlay; tests/deploy/ builds deploy/k8s instead"
    ),
    # docs/service.md, "Changing a running deployment"
    "kubectl rollout status": NotRun(
        "a word of the procedures, not a whole command: tests/cluster/test_cluster_rollouts.py "
        "runs `kubectl rollout status deployment/basra-rules` after each step on the cluster"
    ),
    "kubectl rollout restart deployment/<release>": NotRun(
        "tests/cluster/test_cluster_rollouts.py runs it on the cluster with the release's name, "
        "after renewing the certificate's Secret"
    ),
    # docs/determinism.md
    ".venv/bin/basra-rules play --seed 6578616d706c65 --record /tmp/match.json": Run(
        server="--target"
    ),
    ".venv/bin/basra-rules verify /tmp/match.json": Run(
        after=(".venv/bin/basra-rules play --seed 6578616d706c65 --record /tmp/match.json",)
    ),
    # docs/tracing.md
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4317 .venv/bin/basra-rules serve "
        "--tracing"
    ): Serve(),
    # docs/integration.md
    ".venv/bin/python -m pytest -q tests/http/test_http_php_lobby.py": NotRun(
        "a module of the test command's own pytest run, which runs this test"
    ),
    (
        "php examples/php/lobby.php --gateway http://127.0.0.1:8080 --matches 2 --record "
        "/tmp/php-matches.json"
    ): Run(gateway="127.0.0.1:8080"),
    "bash examples/lobby/try.sh": NotRun(
        "starts both servers until Ctrl-C; tests/lobby runs this script on free ports "
        "(LOBBY_PORT=0) and drives its pages in headless Chromium"
    ),
    (
        ".venv/bin/basra-rules play --target localhost:50051 --bots greedy random --record "
        "/tmp/match.json"
    ): Run(address="localhost:50051"),
    (
        '.venv/bin/python -c "import grpc, pathlib; from basra.v1 import rules_pb2 as pb, '
        "rules_pb2_grpc as rpc; channel = grpc.insecure_channel('localhost:50051', "
        "options=[('grpc.service_config', "
        "pathlib.Path('deploy/grpc-service-config.json').read_text())]); "
        "print(rpc.RulesServiceStub(channel).NewMatch(pb.NewMatchRequest(seed=b'x'))"
        '.state.hand_number)"'
    ): Run(address="localhost:50051"),
    # docs/load-testing.md
    ".venv/bin/python -m testkit.ghz_data": NotRun(
        "rewrites the committed deploy/ghz/data/; `--check` runs the same generation and compares"
    ),
    ".venv/bin/python -m testkit.ghz_data --check": Run(),
    ".venv/bin/basra-rules serve --workers 2 --log-level warning &": Serve(),
    "go install github.com/bojand/ghz/cmd/ghz@v0.121.0": NotRun(
        "installs into the reader's Go bin folder; the test command's set-up runs the same "
        "go install into .ci/tools/go/bin, which this test puts on the PATH"
    ),
    'export PATH="$PWD/.ci/tools/go/bin:$PATH"': Run(),
    "ghz --config deploy/ghz/apply.json my-host:50051": Run(
        address="my-host:50051", extra=SHORT_LOAD
    ),
    "ghz --config deploy/ghz/apply.json --proto proto/basra/v1/rules.proto": GHZ,
    "ghz --config deploy/ghz/batch_apply.json": GHZ,
    "ghz --config deploy/ghz/apply.json -n 50000 -c 32 --connections 8": Run(
        host=True, shorter=(("-n 50000", "-n 300"),)
    ),
    "ghz --config deploy/ghz/legal_moves.json --rps 1000 -z 30s --duration-stop wait": Run(
        host=True, shorter=(("-z 30s", "-z 1s"),)
    ),
    "kubectl port-forward svc/basra-rules 50051:50051": NotRun("needs a cluster with the service"),
    (
        ".venv/bin/basra-rules load deploy/ghz/apply.json --host my-host:50051 -n 50000 -c 32 "
        "--connections 8"
    ): Run(server="--host", extra=SHORT_LOAD),
    ".venv/bin/basra-rules load deploy/ghz/legal_moves.json --rps 1000 -z 30s": Run(
        server="--host", extra=("-z", "1s")
    ),
    ".venv/bin/basra-rules load deploy/ghz/batch_apply.json": Run(
        server="--host", extra=SHORT_LOAD
    ),
    ".venv/bin/basra-rules load deploy/ghz/new_match.json --json": Run(
        server="--host", extra=SHORT_LOAD
    ),
    ".venv/bin/python -m benchmarks.load_bench --calls 8000 --json-out /tmp/run1.json": Run(
        extra=("--workers", "1", *SHORT_LOAD_BENCH)
    ),
    (
        ".venv/bin/python -m benchmarks.load_bench --workers 1 2 --rounds 7 "
        "--json-out /tmp/run2.json"
    ): Run(extra=("--workers", "1", *SHORT_LOAD_BENCH)),
    ".venv/bin/python -m benchmarks.load_bench --merge /tmp/run1.json /tmp/run2.json": Run(
        after=(
            ".venv/bin/python -m benchmarks.load_bench --calls 8000 --json-out /tmp/run1.json",
            ".venv/bin/python -m benchmarks.load_bench --workers 1 2 --rounds 7 "
            "--json-out /tmp/run2.json",
        )
    ),
    ".venv/bin/python -m benchmarks.load_bench --workers 1 --sync-threads 2": Run(
        extra=SHORT_LOAD_BENCH
    ),
    ".venv/bin/python -m benchmarks.load_bench --defaults --grpc-go --runs 3": Run(
        extra=SHORT_DEFAULTS
    ),
    ".venv/bin/python -m benchmarks.load_bench --defaults --grpc-go --generator ghz --runs 3": Run(
        extra=SHORT_DEFAULTS
    ),
    (
        ".venv/bin/python -m benchmarks.generators --configs deploy/ghz/apply.json "
        "deploy/ghz/legal_moves.json --rounds 5 --calls 5000"
    ): Run(extra=("--rounds", "1", "--calls", "200")),
    # docs/service.md
    ".venv/bin/python -m service.plan_table": NotRun(
        "rewrites the shipped service/plan_table.bin.gz; tests/service/ checks it as --check does"
    ),
    ".ci/tools/node_modules/.bin/buf lint": Run(),
    ".ci/tools/node_modules/.bin/buf format --diff --exit-code": Run(),
    ".ci/tools/node_modules/.bin/buf breaking --against proto/released.binpb": Run(),
    ".ci/tools/node_modules/.bin/buf build --exclude-source-info -o proto/released.binpb": NotRun(
        "the release step: it rewrites the released contract that buf breaking compares with"
    ),
}

DOCUMENTED = commands()
# The commands a reader may run today: all but the historical ones.
CURRENT = [c for c in DOCUMENTED if not c.historical]
# A command whose run another one needs first is run there, not on its own.
PREREQUISITES = {
    before for plan in COMMANDS.values() if isinstance(plan, Run) for before in plan.after
}
TO_RUN = sorted(
    {c.text for c in CURRENT if isinstance(COMMANDS.get(c.text), Run | Serve)} - PREREQUISITES
)
# What a historical command's section must name: the commit it measured and the date.
COMMIT = re.compile(r"`[0-9a-f]{7,40}`")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def test_the_readme_opens_with_the_two_line_quick_start_that_ci_runs() -> None:
    """Start the server; run the whole suite: the same test command as CI's entry point."""
    readme = REPO / "README.md"
    first = blocks(readme)[0]
    text = readme.read_text(encoding="utf-8")
    assert text.index("## Quick start") < text.index("```")
    assert first.tag in SHELL_TAGS
    assert first.body.splitlines() == ["bash .ci/serve", "bash .ci/test"]
    assert (REPO / ".ci" / "run").read_text().splitlines()[-1] == "exec bash .ci/test"


def test_every_fenced_block_says_what_it_holds() -> None:
    """A block without a known tag could hold commands that nobody reads out of it."""
    unknown = [
        f"{b.page}:{b.line} {b.info!r}"
        for page in pages()
        for b in blocks(page)
        if not b.well_marked
    ]
    assert unknown == []


def test_every_documented_command_is_run_or_listed_as_not_run() -> None:
    """A new command fails here until it is put in RUN or NOT_RUN; a stale entry fails too."""
    documented = {c.text for c in CURRENT}
    unlisted = sorted(f"{c.page}:{c.line}: {c.text}" for c in CURRENT if c.text not in COMMANDS)
    assert unlisted == []
    assert sorted(set(COMMANDS) - documented) == []
    assert all(before in documented for before in PREREQUISITES)


def _section(page: str, line: int) -> str:
    """The text of a page from the heading above `line` to the next heading of any level."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    start = max((n for n in range(line) if lines[n].startswith("#")), default=0)
    end = next((n for n in range(line, len(lines)) if lines[n].startswith("#")), len(lines))
    return "\n".join(lines[start:end])


def test_every_historical_command_stands_with_its_commit_and_date() -> None:
    """A historical block shows how a figure of an older version was measured: its section
    names that version's commit and the date, and the block is marked the one known way."""
    historical = [b for page in pages() for b in blocks(page) if b.historical]
    assert historical, f"no `sh {HISTORICAL}` block left: drop the marker or this test"
    bare = [
        f"{b.page}:{b.line}"
        for b in historical
        if not (COMMIT.search(_section(b.page, b.line)) and DATE.search(_section(b.page, b.line)))
    ]
    assert bare == []


def test_no_command_needs_an_activated_environment() -> None:
    """After the quick start, the project's programs are reached through `.venv/bin/`."""
    found = [
        f"{c.page}:{c.line}: {c.text}"
        for c in DOCUMENTED
        if set(programs(c.text)) & set(ENVIRONMENT_PROGRAMS)
    ]
    assert found == []


def test_the_record_shown_in_determinism_md_is_an_excerpt_of_the_example() -> None:
    """Every line of the JSON record of docs/determinism.md, but `...`, is the example's."""
    page = REPO / "docs" / "determinism.md"
    shown = [b for b in blocks(page) if b.tag == "json"]
    assert len(shown) == 1
    example = (REPO / "docs" / "example-record.json").read_text().splitlines()
    lines = [line for line in shown[0].body.splitlines() if line.strip() != "..."]
    assert len(lines) >= 8
    position = 0
    for line in lines:
        assert line in example[position:], line
        position = example.index(line, position) + 1


@pytest.fixture(scope="module")
def server() -> Iterator[harness.ServedProcess]:
    """A server with the quick start's defaults (1 worker, info logs) on a free port."""
    served = harness.start([])
    yield served
    served.stop()


@pytest.fixture(scope="module")
def http(server: harness.ServedProcess) -> Iterator[str]:
    """The HTTP/JSON gateway in front of the test's server: its host:port."""
    with gateway(server.target) as url:
        yield url.removeprefix("http://")


def _adapted(text: str, tmp: Path, target: str, http: str | None) -> str:
    plan = COMMANDS[text]
    assert isinstance(plan, Run)
    line = text.replace("/tmp/", f"{tmp}/")
    if plan.gateway:
        assert plan.gateway in line and http is not None
        line = line.replace(plan.gateway, http)
    for written, replacement in plan.shorter:
        assert written in line
        line = line.replace(written, replacement)
    if plan.host:
        line += f" {target}"
    if plan.address:
        assert plan.address in line
        line = line.replace(plan.address, target)
    if plan.server:
        line += f" {plan.server} {target}"
    return " ".join([line, *plan.extra])


def _run(
    text: str, tmp: Path, target: str, http: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", _adapted(text, tmp, target, http)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
        check=False,
        env={**os.environ, "PATH": os.pathsep.join((str(GO_BIN), os.environ["PATH"]))},
    )


def _statuses(summary: str) -> list[str]:
    """The status lines of a ghz summary ("[OK]   300 responses")."""
    section = summary.split("Status code distribution:\n", 1)[1].split("\n\n", 1)[0]
    return [" ".join(line.split()) for line in section.splitlines() if line.strip()]


def _serve(text: str) -> None:
    """Start a documented server command on a free port; it must serve, then stop cleanly."""
    words = text.removesuffix("&").split()
    settings = {}  # `NAME=value` words before the program: bash's exec takes none
    while words and SETTING.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        settings[name] = value
    line = " ".join(words)
    with reserved_port() as port:  # held until the server has bound it
        ports = {"BASRA_HOST": LOOPBACK, "BASRA_PORT": str(port), "BASRA_METRICS_PORT": "0"}
        process = subprocess.Popen(
            ["bash", "-c", f"exec {line}"],
            cwd=REPO,
            env={**os.environ, **settings, **ports},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            harness.wait_healthy(f"{LOOPBACK}:{port}", process, harness.START_SECONDS)
        finally:
            process.send_signal(signal.SIGTERM)
            _, errors = process.communicate(timeout=60)
    assert process.returncode == 0, errors


@pytest.mark.parametrize("text", TO_RUN)
def test_the_documented_command_works_as_written(
    text: str, server: harness.ServedProcess, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    plan = COMMANDS[text]
    if isinstance(plan, Serve):
        _serve(text)
        return
    assert isinstance(plan, Run)
    # The gateway only for the commands that call it (started once for the module).
    needs_http = any(_needs_gateway(command) for command in (*plan.after, text))
    http = request.getfixturevalue("http") if needs_http else None
    for before in plan.after:
        done = _run(before, tmp_path, server.target, http)
        assert done.returncode == 0, f"{before}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        _check_prints(before, done)
    done = _run(text, tmp_path, server.target, http)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if programs(text)[:1] == ["ghz"]:
        statuses = _statuses(done.stdout)
        assert len(statuses) == 1, done.stdout[-2000:]
        assert re.fullmatch(r"\[OK\] \d+ responses", statuses[0]), done.stdout[-2000:]
    _check_prints(text, done)


def _needs_gateway(text: str) -> bool:
    plan = COMMANDS[text]
    return isinstance(plan, Run) and plan.gateway is not None


def _check_prints(text: str, done: subprocess.CompletedProcess[str]) -> None:
    """The output is what the page shows after the command (`# ` lines), if it shows any."""
    prints = {c.prints for c in DOCUMENTED if c.text == text and c.prints}
    for expected in prints:
        assert tuple(done.stdout.splitlines()) == expected, text
