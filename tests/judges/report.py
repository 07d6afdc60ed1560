"""Writes docs/compatibility.md, the report card, from the judges' results: run the
judges (``scripts/test tests/judges``, then ``scripts/test --extended tests/judges``),
then ``scripts/compatibility-report``.

Inputs, all written by the suite except the last:

- ``build/judges/results.json``: per judge test, the client or tool and version it
  judges by, what it does and its outcome (tests/judges/conftest.py);
- ``build/judges/suites.json``: per test of the third-party suites the judges run
  (kafka-python's own), its outcome and why it does not pass where it does not;
- ``build/judges/api_versions.json``: the Kafka listener's ApiVersions answer;
- ``docs/compatibility/librdkafka-2.15.0.tsv``: librdkafka's own broker tests, run by
  hand (its header says how), per test the outcome before and after this project's fixes
  and why;
- ``docs/compatibility/franz-go-1.21.5.tsv``: franz-go's ``pkg/kgo`` tests, run by hand
  (its header says how), per test whether it talks to the cluster, its outcome in each
  run, the seconds each run took and why it did not pass;
- ``docs/compatibility/sarama-1.62.0.tsv``: Sarama's functional tests, run by hand (its
  header says how), per test its outcome, seconds and why it did not pass.

The README's compatibility sentence (between the ``compatibility:`` markers) is
rewritten with the headline numbers.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "judges"
DOC = ROOT / "docs" / "compatibility.md"
README = ROOT / "README.md"
LIBRDKAFKA = ROOT / "docs" / "compatibility" / "librdkafka-2.15.0.tsv"
FRANZ_GO = ROOT / "docs" / "compatibility" / "franz-go-1.21.5.tsv"
SARAMA = ROOT / "docs" / "compatibility" / "sarama-1.62.0.tsv"
MARKERS = ("<!-- compatibility:start -->", "<!-- compatibility:end -->")

NOT_SERVED = [
    ("Produce v0-2 (message formats v0/v1)", "RecordBatch v2 only, by design"),
    ("KIP-890 part 2: TRANSACTION_ABORTABLE is never answered", "issue 34"),
    (
        "SASL re-authentication (KIP-368, `connections.max.reauth.ms`): librdkafka's 0142",
        "issue 35",
    ),
    ("Share groups (KIP-932): librdkafka's 0135 share-consumer subtests, 0170-0185", "none yet"),
    ("SASL GSSAPI (Kerberos) and OAUTHBEARER logins: PLAIN and SCRAM only", "none yet"),
]
"""What the judges found not served, and where it is being built."""


def load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else {}


def api_table(versions: Sequence[dict[str, Any]]) -> str:
    """The Markdown table of the API keys and versions served."""
    rows = ["| key | API | versions |", "|---:|---|---|"]
    rows += [f"| {v['api_key']} | {v['name']} | {v['min']}-{v['max']} |" for v in versions]
    return "\n".join(rows)


def tsv_rows(path: Path) -> list[list[str]]:
    """The rows of a by-hand run's TSV (its comment header and column names left out)."""
    if not path.exists():
        return []
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return [ln.split("\t") for ln in lines[1:]]


def tsv_header(path: Path) -> list[str]:
    """The comment lines of a by-hand run's TSV: how it was run."""
    if not path.exists():
        return []
    return [ln[1:].strip() for ln in path.read_text().splitlines() if ln.startswith("#")]


def librdkafka_rows() -> list[list[str]]:
    """(test, before, after, why) rows of the by-hand librdkafka run."""
    return tsv_rows(LIBRDKAFKA)


def librdkafka_header() -> list[str]:
    return tsv_header(LIBRDKAFKA)


def franz_go_rows() -> list[list[str]]:
    """(test, broker-facing, outcome, seconds, why) rows of the by-hand franz-go run."""
    return tsv_rows(FRANZ_GO)


def sarama_rows() -> list[list[str]]:
    """(test, outcome, seconds, why) rows of the by-hand Sarama run."""
    return tsv_rows(SARAMA)


def tally(outcomes: Iterable[str]) -> str:
    counts = Counter(outcomes)
    return ", ".join(f"{counts[k]} {k.lower()}" for k in sorted(counts, key=_order))


def _order(outcome: str) -> int:
    order = ["PASSED", "passed", "PASS", "FAILED", "failed", "FAIL", "error", "SKIPPED"]
    return [*order, "skipped", "SKIP"].index(outcome)


def build() -> tuple[str, str]:
    """(the report card, the README's headline sentence)."""
    results: dict[str, dict[str, Any]] = load(BUILD / "results.json")
    suites: dict[str, dict[str, Any]] = load(BUILD / "suites.json")
    versions: list[dict[str, Any]] = load(BUILD / "api_versions.json") or []
    by_client: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for test_id, entry in sorted(results.items()):
        by_client[entry["client"]].append((test_id, entry))
    suite_by_client: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in suites.values():
        suite_by_client[entry["client"]].append(entry)
    rdk = librdkafka_rows()
    rdk_after = Counter(row[2] for row in rdk)
    rdk_before = Counter(row[1] for row in rdk)
    franz = franz_go_rows()
    franz_broker = [row for row in franz if row[1] == "yes"]
    sarama = sarama_rows()

    out: list[str] = [
        "# Compatibility report card",
        "",
        "Generated by `scripts/compatibility-report` from the results of the judges in",
        "`tests/judges/` (Kafka's own tools, Java client and Streams; kafka-python's and",
        "confluent-kafka's own test programs) and of librdkafka's test suite run by hand.",
        "Do not edit: rerun the judges (`scripts/test tests/judges`, then with `--extended`)"
        " and the script.",
        "",
        "## Headline",
        "",
        "| judge | what ran | outcome |",
        "|---|---|---|",
    ]
    for client in ["ApiVersions", *suite_by_client]:  # reported in sections of their own
        by_client.pop(client, None)
    judged_tests = 0
    for client, entries in by_client.items():
        judged_tests += len(entries)
        what = "; ".join(sorted({e["what"] for _, e in entries}))
        out.append(f"| {client} | {what} | {tally(e['outcome'] for _, e in entries)} |")
    for client, entries in suite_by_client.items():
        out.append(
            f"| {client} | every test of its suite | {tally(e['outcome'] for e in entries)} |"
        )
    if rdk:
        out.append(
            f"| librdkafka 2.15.0 `tests/` (by hand) | {len(rdk)} broker-facing entries, one at a"
            f" time | {tally(rdk_after.elements())} (before this work: "
            f"{tally(rdk_before.elements())}) |"
        )
    if franz:
        out.append(
            f"| franz-go 1.21.5 `pkg/kgo` tests (by hand) | {len(franz)} tests,"
            f" {len(franz_broker)} of them against the cluster | broker-facing:"
            f" {tally(row[2] for row in franz_broker)}; all: {tally(row[2] for row in franz)} |"
        )
    if sarama:
        out.append(
            f"| Sarama 1.62.0 functional tests (by hand) | {len(sarama)} tests against a"
            f" 5-broker cluster behind toxiproxy | {tally(row[1] for row in sarama)} |"
        )
    out += ["", "## Judges in the suite", ""]
    for client, entries in by_client.items():
        out += [f"### {client}", "", "| test | outcome |", "|---|---|"]
        for test_id, entry in entries:
            name = test_id.rsplit("::", 1)[-1]
            out.append(f"| `{name}`: {entry['what']} | {entry['outcome']} |")
        out.append("")
    for client, entries in suite_by_client.items():
        out += [
            f"### {client}",
            "",
            "Every test of its `test/integration`; those that do not pass, and why:",
            "",
            "| test | outcome | why |",
            "|---|---|---|",
        ]
        for entry in sorted(entries, key=lambda e: e["what"]):
            if entry["outcome"] != "passed":
                out.append(f"| `{entry['what']}` | {entry['outcome']} | {entry['why']} |")
        passed = sum(e["outcome"] == "passed" for e in entries)
        out += ["", f"The other {passed} pass.", ""]
    if rdk:
        out += ["## librdkafka 2.15.0's own tests (by hand)", ""]
        out += [f"{line}  " for line in librdkafka_header()]
        out += ["", "| test | before | after | why (when not passed) |", "|---|---|---|---|"]
        out += [
            f"| {row[0]} | {row[1]} | {row[2]} | {row[3] if len(row) > 3 else ''} |" for row in rdk
        ]
        out.append("")
    if franz:
        out += ["## franz-go 1.21.5's own tests (by hand)", ""]
        out += [f"{line}  " for line in tsv_header(FRANZ_GO)]
        out += ["", "Those against the cluster:", ""]
        out += [
            "| test | outcome | seconds (each run) | why (when not passed) |",
            "|---|---|---|---|",
        ]
        out += [f"| {row[0]} | {row[2]} | {row[3]} | {row[4]} |" for row in franz_broker]
        out += ["", f"The other {len(franz) - len(franz_broker)} need no broker:"]
        out += [f" {tally(row[2] for row in franz if row[1] != 'yes')}.", ""]
    if sarama:
        out += ["## Sarama 1.62.0's functional tests (by hand)", ""]
        out += [f"{line}  " for line in tsv_header(SARAMA)]
        out += ["", "| test | outcome | seconds | why (when not passed) |", "|---|---|---|---|"]
        out += [f"| {row[0]} | {row[1]} | {row[2]} | {row[3]} |" for row in sarama]
        out.append("")
    out += ["## Not served yet", "", "| what | where |", "|---|---|"]
    out += [f"| {what} | {where} |" for what, where in NOT_SERVED]
    out += ["", "## API keys and versions served (Kafka listener, ApiVersions)", ""]
    out += [api_table(versions), ""]

    headline = (
        f"{judged_tests} judge tests in the suite (Kafka 3.9.2's tools, Java client and Streams;"
        " Kafka's Java client 4.1.1's transactions; confluent-kafka's verifiable clients)"
    )
    for client, entries in suite_by_client.items():
        counts = Counter(e["outcome"] for e in entries)
        headline += (
            f"; {client}: {counts['passed']} of {len(entries)} pass,"
            f" {counts['failed'] + counts['error']} do not (each listed with why),"
            f" {counts['skipped']} skip themselves (KRaft-only, own-broker or old-version tests)"
        )
    if rdk:
        headline += (
            f"; librdkafka 2.15.0's broker tests (by hand): {rdk_after['PASSED']} of {len(rdk)}"
            f" pass, {rdk_after['SKIPPED']} skip (version, known issues, not served),"
            f" {rdk_after['FAILED']} fail (each listed with why)"
        )
    if franz:
        passed = sum(row[2] == "PASS" for row in franz_broker)
        headline += (
            f"; franz-go 1.21.5's broker tests (by hand): {passed} of {len(franz_broker)} pass,"
            f" {sum(row[2] == 'SKIP' for row in franz_broker)} skip (share groups, Kafka 4.2+)"
        )
    if sarama:
        counts = Counter(row[1] for row in sarama)
        headline += (
            f"; Sarama 1.62.0's functional tests (by hand): {counts['PASS']} of {len(sarama)}"
            f" pass, {counts['SKIP']} skip, {counts['FAIL']} fail (each listed with why)"
        )
    return "\n".join(out), headline


def main(argv: list[str]) -> int:
    doc, headline = build()
    DOC.write_text(doc)
    readme = README.read_text()
    start, end = MARKERS
    if start in readme:
        readme = re.sub(
            re.escape(start) + ".*?" + re.escape(end),
            f"{start}{headline}.{end}",
            readme,
            flags=re.S,
        )
        README.write_text(readme)
    print(f"wrote {DOC.relative_to(ROOT)}: {headline}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
