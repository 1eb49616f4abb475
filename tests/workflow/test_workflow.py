"""The workflow for real, on the ci preset: both engines, edits, bad input, the remote round trip.

One project copy is built once by ``snakemake --cores 2``; the tests then run in file order, each
leaving the project as it found it (params.yaml restored, outputs back in sync).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from genlab.report.metrics import claim_file
from genlab.workflow.adapter import dvc_jobs
from genlab.workflow.code_deps import CodeDeps
from genlab.workflow.code_digest import closure_sources
from genlab.workflow.sync import SNAKEMAKE_MARKER
from tests_support import ROOT, copy_project, run, tool_env

pytestmark = pytest.mark.workflow


class Project:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def sh(self, *args: str, check: bool = True, cwd: Path | None = None,
           timeout: float = 600):
        return run(list(args), cwd or self.root, self.env, check=check, timeout=timeout)

    def snakemake_plan(self) -> set[str]:
        """Rules `snakemake -n` would run (the `all` target excluded)."""
        out = self.sh("snakemake", "-n", "--quiet", "rules").stdout
        return {m.group(1) for m in re.finditer(r"^(\S+)\s+\d+$", out, re.M)} - {"all", "total"}

    def dvc_repro(self) -> set[str]:
        """Stages `dvc repro` actually ran."""
        out = self.sh("dvc", "repro").stdout
        return set(re.findall(r"Running stage '([^']+)'", out))

    def edit(self, update) -> None:
        raw = yaml.safe_load((self.root / "params.yaml").read_text())
        update(raw)
        (self.root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))

    def restore_params(self) -> None:
        self.sh("git", "checkout", "--", "params.yaml")

    def digest(self) -> dict[str, str]:
        """Every file that a run could write or delete, by content."""
        files = [p for top in ("data", "reports", ".snakemake", "logs") for p in
                 (self.root / top).rglob("*") if p.is_file()]
        files += [self.root / "dvc.lock"]
        return {str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(files) if p.exists()}


def rule(stage: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", stage)


TRAIN_STAGES = {"random_labels_train_s0-9"}  # the sweep trains as one group per ten seeds
AFTER_TRAINING = {"random_labels_sharpness", "random_labels_intrinsic_dim",
                  "random_labels_aggregate", "report"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    home = tmp_path_factory.mktemp("home")  # the default remote ~/.cache/genlab/... lands here
    env = tool_env(home)
    proj = Project(copy_project(tmp_path_factory.mktemp("wf"), env), env)
    # the whole ci pipeline (minutes; far more on a loaded machine): the limit only guards a hang
    proj.sh("snakemake", "--cores", "2", timeout=2400)
    return proj


def test_snakemake_run_leaves_dvc_clean_and_nothing_to_do(project: Project) -> None:
    assert project.sh("dvc", "status", "--json").stdout.strip() == "{}"
    assert project.snakemake_plan() == set()
    assert project.dvc_repro() == set()
    claims = json.loads((project.root / "reports/claims.json").read_text())["claims"]
    # one entry per claim and condition (the ci preset runs eos_gd at two η, one σ_p, one
    # class spread, the MLP and CNN baselines alone on MNIST-1D: 4 table entries + 2, each
    # measures_grid claim on three tasks (the CNN family too), the layer-ID claims of the CNN
    # alone and the double-descent claims of the MLP alone; the MNIST-1D influence and
    # mislabel studies' comparisons per model; mislabel_mnist1d's per dataset, the digits MLP
    # not run; influence's MLP claims under the GGN and the Hessian)
    assert Counter(c["study"] for c in claims) == {"random_labels": 4, "benign_oscillation": 4,
                                                   "double_descent": 2, "eos_gd": 8,
                                                   "sgd_stability": 3, "intrinsic_dim": 6,
                                                   "influence": 8, "mislabel_detection": 3,
                                                   "measures_grid": 12, "neural_collapse": 4,
                                                   "mnist1d_baselines": 6, "layer_id": 2,
                                                   "deep_double_descent": 2,
                                                   "influence_mnist1d": 5,
                                                   "mislabel_mnist1d": 8, "layer_rotation": 3,
                                                   "full_batch_gd": 3, "repetition": 3,
                                                   "label_sharpness": 5}


def test_a_stage_that_dvc_lock_names_but_the_cache_lacks_is_recorded_again(
        project: Project) -> None:
    """A dvc.lock from elsewhere (a colleague's, an earlier workspace's) can name exactly the
    outputs a run made here while this cache never held them: the stamps agree, and only the
    cache tells. Recording after a run (Snakemake's onsuccess) commits that stage again."""
    entry = yaml.safe_load((project.root / "dvc.lock").read_text())["stages"]["report"]
    md5 = next(o["md5"] for o in entry["outs"] if o["path"] == "data/stamps/report.json")
    (project.root / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).unlink()
    assert json.loads(project.sh("dvc", "status", "--json").stdout) == {
        "report": [{"changed outs": {"data/stamps/report.json": "not in cache"}}]}
    assert project.snakemake_plan() == set()
    recorded = project.sh(sys.executable, "-c", "from genlab.workflow.sync import record_in_dvc;"
                          " print(record_in_dvc('.'))").stdout
    assert recorded.strip() == "['report']"
    assert project.sh("dvc", "status", "--json").stdout.strip() == "{}"


def test_dvc_metrics_are_a_narrow_table_of_every_claim(project: Project) -> None:
    """`dvc metrics show` prints a row per claim (and per study's counts) and a column per key:
    the same few keys for every claim, so the table stays narrow however many claims there are;
    each claim's status in it is the report's."""
    table = project.sh("dvc", "metrics", "show", "--md").stdout
    header = next(line for line in table.splitlines() if line.startswith("|"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert len(columns) <= 60 and {"Path", "kind", "status", "estimate", "interval_low",
                                    "interval_high", "n"} <= set(columns), columns
    shown = json.loads(project.sh("dvc", "metrics", "show", "--json").stdout)
    files = shown[""]["data"] if "" in shown else next(iter(shown.values()))["data"]
    claims = json.loads((project.root / "reports/claims.json").read_text())["claims"]
    for claim in claims:
        path = f"data/{claim['study']}/metrics/{claim_file(claim)}"
        assert files[path]["data"]["status"] == claim["status"], path
    assert not any("/runs/" in p for p in files)  # a run's metrics.json is a plain output


def test_every_rule_logs(project: Project) -> None:
    logs = project.root / "logs"
    assert "trained random_labels/p0-s0" in (logs / "random_labels/train_s0-9.log").read_text()
    assert "trained eos_gd/lr0_2-s0" in (logs / "eos_gd/lr0_2-s0/train.log").read_text()
    assert (logs / "report.log").exists() and (logs / "random_labels/aggregate.log").exists()


def test_the_pipeline_benchmark_accounts_for_every_job(project: Project, tmp_path: Path) -> None:
    """benchmarks/pipeline.py on the fixture's run: each job's stage log has the CLI's process
    line, and the accounting adds up (start-up + writing + compute = process ≤ Snakemake's span
    within its whole-second stamps)."""
    out = tmp_path / "pipeline.json"
    project.sh(sys.executable, str(ROOT / "benchmarks/pipeline.py"), "--project",
               str(project.root), "--json", str(out))
    record = json.loads(out.read_text())
    # the fixture's run ran every stage, the code digests at parse time (genlab.workflow.sync)
    assert record["jobs"] == len([j for j in dvc_jobs(project.root)
                                  if j.stage != "code_digests"])
    totals = record["totals"]
    assert 0 < totals["start_up_s"] < totals["process_s"]
    assert totals["writing_s"] > 0 and totals["compute_s"] > 0
    assert totals["start_up_s"] + totals["writing_s"] + totals["compute_s"] == pytest.approx(
        totals["process_s"])
    assert totals["process_s"] <= totals["span_s"] + record["jobs"]
    assert record["efficiency"] > 0.9  # ≥ 1 but for Snakemake's whole-second stamps
    assert sum(k["jobs"] for k in record["by_kind"].values()) == record["jobs"]
    assert set(record["by_kind"]) == {"check_params", "synthesize", "train", "analyze",
                                      "aggregate", "report"}


def test_runtime_edit_reruns_nothing(project: Project) -> None:
    def runtime(raw):
        raw["runtime"].update(threads=2, log_level="DEBUG")
    project.edit(runtime)
    try:
        assert project.snakemake_plan() == set()
        assert project.sh("dvc", "status", "--json").stdout.strip() == "{}"
    finally:
        project.restore_params()


def test_train_edit_reruns_training_and_what_follows_in_both_engines(project: Project) -> None:
    expected = {"check_params", *TRAIN_STAGES, *AFTER_TRAINING}

    def lr(raw):
        raw["studies"]["random_labels"]["train"]["lr"] = 0.04
    project.edit(lr)
    try:
        assert project.snakemake_plan() == {rule(s) for s in expected}
        assert project.dvc_repro() == expected
        # DVC's fresh outputs carry no Snakemake records; sync adopts them, guarded by dvc status
        project.sh("genlab", "sync")
        assert project.snakemake_plan() == set()
    finally:
        project.restore_params()
    # back to the original settings: DVC restores the old outputs from its run cache; only the
    # gate re-validates (its stamp is `persist`, which DVC does not run-cache)
    assert project.dvc_repro() == {"check_params"}
    project.sh("genlab", "sync")
    assert project.snakemake_plan() == set()


def test_one_run_edit_reruns_that_run_only(project: Project) -> None:
    def seed(raw):
        runs = raw["studies"]["eos_gd"]["runs"]
        del runs["lr0_3-s0"]
        runs["lr0_3-s7"] = {"lr": 0.3, "seed": 7}
    project.edit(seed)
    try:
        # a new seed is a new data draw: its own synthesize stage, and no other run retrains
        assert project.snakemake_plan() == {
            "check_params", "eos_gd_synthesize_s7", rule("eos_gd_train@lr0_3-s7"),
            "eos_gd_sharpness", "eos_gd_intrinsic_dim", "eos_gd_aggregate", "report"}
    finally:
        project.restore_params()


def test_one_run_edit_in_a_group_retrains_the_groups_of_its_seeds(project: Project) -> None:
    """A run moved from seed 0 to a new seed 17: seed 0's block of ten seeds trains again (one
    run fewer), seed 17 gets its data and its block (seeds 10-19) a group of its own, and what
    follows reruns."""
    def seed(raw):
        runs = raw["studies"]["random_labels"]["runs"]
        del runs["p1-s0"]
        runs["p1-s17"] = {"label_noise": 1.0, "seed": 17}
    project.edit(seed)
    try:
        assert project.snakemake_plan() == {rule(s) for s in (
            "check_params", "random_labels_synthesize_s17", "random_labels_train_s10-19",
            *TRAIN_STAGES, *AFTER_TRAINING)}
    finally:
        project.restore_params()


def test_analysis_edit_reruns_that_analysis_and_what_follows_in_both_engines(
        project: Project) -> None:
    expected = {"check_params", "eos_gd_sharpness", "eos_gd_aggregate", "report"}

    def density(raw):
        raw["studies"]["eos_gd"]["analyses"]["sharpness"]["density_num_steps"] = 12
    project.edit(density)
    try:
        assert project.snakemake_plan() == expected
        assert project.dvc_repro() == expected
        project.sh("genlab", "sync")
        assert project.snakemake_plan() == set()
    finally:
        project.restore_params()
    assert project.dvc_repro() == {"check_params"}
    project.sh("genlab", "sync")
    assert project.snakemake_plan() == set()


def test_data_edit_reruns_everything_downstream_of_the_data(project: Project) -> None:
    def n_test(raw):
        raw["studies"]["random_labels"]["data"]["n_test"] = 500
    project.edit(n_test)
    try:
        assert project.snakemake_plan() == {rule(s) for s in (
            "check_params", "random_labels_synthesize_s0", *TRAIN_STAGES, *AFTER_TRAINING)}
    finally:
        project.restore_params()


def downstream(jobs, stages: set[str]) -> set[str]:
    """``stages`` and every stage that depends, directly or not, on one of their outputs."""
    from genlab.workflow.adapter import is_folder_output

    def feeds(out: str, dep: str) -> bool:
        return out == dep or (is_folder_output(out) and dep.startswith(out + "/")) or \
            out.startswith(dep.rstrip("/") + "/")

    found, grew = set(stages), True
    while grew:
        # Snakemake orders nothing behind the params gate (it checks params.yaml when it parses)
        outs = [o for j in jobs if j.stage in found and not j.gate for o in j.outs]
        more = {j.stage for j in jobs if j.stage not in found and not j.gate
                and any(feeds(o, d) for o in outs for d in j.deps)}
        found |= more
        grew = bool(more)
    return found


def test_a_comment_reruns_nothing_in_either_engine(project: Project) -> None:
    """A comment (and a docstring) in one analysis module: DVC reruns only code_digests, whose
    digests come out the same, so no stage that imports the module; Snakemake plans nothing."""
    path = "src/genlab/analyses/curvature/trace.py"
    trace = project.root / path
    stat, text = trace.stat(), trace.read_text()
    trace.write_text(text.replace('"""', '"""Reworded. ', 1) + "# a comment\n")
    try:
        assert set(json.loads(project.sh("dvc", "status", "--json").stdout)) == {"code_digests"}
        assert project.dvc_repro() == {"code_digests"}
        assert project.snakemake_plan() == set()
        assert project.sh("dvc", "status", "--json").stdout.strip() == "{}"
    finally:
        trace.write_text(text)
        os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert project.dvc_repro() == {"code_digests"}
    assert project.snakemake_plan() == set()
    assert project.sh("dvc", "status", "--json").stdout.strip() == "{}"


def test_a_code_edit_reruns_exactly_the_stages_that_import_it_in_both_engines(
        project: Project) -> None:
    """One token of code in one analysis module: once code_digests has run (DVC runs it first;
    Snakemake's parse runs it), `dvc status` lists exactly the stages whose import closure holds
    the module, and `snakemake -n` plans exactly those and what depends on their outputs, as it
    does for any stage that reruns."""
    path = "src/genlab/analyses/curvature/trace.py"
    trace = project.root / path
    stat, text = trace.stat(), trace.read_text()
    jobs = dvc_jobs(project.root)
    code = CodeDeps(project.root)
    importers = {j.stage for j in jobs
                 if path in closure_sources(list(j.deps), project.root, code)}
    assert "eos_gd_sharpness" in importers and "random_labels_intrinsic_dim" not in importers
    trace.write_text(text + "pass\n")
    try:
        # before code_digests runs, DVC cannot know which digests change: it names that stage
        assert set(json.loads(project.sh("dvc", "status", "--json").stdout)) == {"code_digests"}
        project.sh("dvc", "repro", "--single-item", "code_digests")
        assert set(json.loads(project.sh("dvc", "status", "--json").stdout)) == importers
        plan = project.snakemake_plan()
        assert plan == {rule(s) for s in downstream(jobs, importers)}
        assert "check_params" not in plan and "random_labels_intrinsic_dim" not in plan
    finally:
        trace.write_text(text)
        os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert project.snakemake_plan() == set()  # its parse put the digest back
    assert project.dvc_repro() == {"code_digests"}  # dvc.lock held the edited digests
    assert project.sh("dvc", "status", "--json").stdout.strip() == "{}"


def test_a_study_switched_off_or_deleted_leaves_a_valid_pipeline_in_both_engines(
        project: Project) -> None:
    def off(raw):
        raw["studies"]["eos_gd"]["enabled"] = False
        del raw["studies"]["neural_collapse"]
    project.edit(off)
    try:
        # Snakemake rewrites dvc.yaml for the new params at parse time; the gate would tell a
        # DVC user to (`genlab dag --write`), tested below
        assert project.snakemake_plan() == {"check_params", "report"}
        stages = (project.root / "dvc.yaml").read_text()
        assert "eos_gd_" not in stages and "neural_collapse_" not in stages
        assert set(json.loads(project.sh("dvc", "status", "--json").stdout)) == {
            "check_params", "report"}
    finally:
        project.restore_params()
    # the other way round: params back, dvc.yaml still the switched-off one; DVC's gate stops
    # with the fix before any stage runs
    proc = project.sh("dvc", "repro", check=False)
    assert proc.returncode != 0 and "genlab dag --write" in proc.stdout + proc.stderr
    project.sh("genlab", "dag", "--write")
    project.sh("git", "diff", "--exit-code", "--", "dvc.yaml")
    assert project.snakemake_plan() == set()
    assert project.sh("dvc", "status", "--json").stdout.strip() == "{}"


def stale_in_both(project: Project) -> set[str]:
    """The stages `dvc status` lists, after checking that `snakemake -n` plans exactly those and
    what depends on their outputs (the two engines agree)."""
    from genlab.workflow.adapter import dvc_jobs

    stale = set(json.loads(project.sh("dvc", "status", "--json").stdout))
    assert project.snakemake_plan() == {rule(s) for s in downstream(dvc_jobs(project.root),
                                                                     stale)}
    return stale


def k(value: int):
    def edit(raw):
        raw["studies"]["eos_gd"]["analyses"]["sharpness"]["k"] = value
    return edit


SHARPNESS_EDIT = {"check_params", "eos_gd_sharpness", "eos_gd_aggregate", "report"}


def stamped_k(project: Project) -> int:
    stamp = json.loads((project.root / "data/stamps/eos_gd_sharpness.json").read_text())
    return stamp["inputs"]["params"]["studies.eos_gd.analyses.sharpness"]["k"]


def back_in_sync(project: Project) -> None:
    """Params restored by the caller: one Snakemake run makes everything current again."""
    project.sh("snakemake", "--cores", "2", timeout=1200)
    assert stale_in_both(project) == set()


def test_a_targeted_run_records_only_what_is_current(project: Project) -> None:
    """After a params edit, a run of one target (or --until one stage) records that target in
    DVC and nothing stale: both engines still want the edited analysis and what follows."""
    k0 = stamped_k(project)
    project.edit(k(k0 + 1))
    try:
        assert stale_in_both(project) == SHARPNESS_EDIT
        project.sh("snakemake", "--cores", "1", "data/params.checked")
        assert stale_in_both(project) == SHARPNESS_EDIT - {"check_params"}
        project.sh("snakemake", "--cores", "1", "--until", "eos_gd_sharpness")
        assert stale_in_both(project) == {"eos_gd_aggregate", "report"}
        assert stamped_k(project) == k0 + 1
    finally:
        project.restore_params()
    # reverted: the gate and the analysis hold the edit, the summary their outputs' old bytes;
    # the report never saw the edit
    assert stale_in_both(project) == SHARPNESS_EDIT - {"report"}
    back_in_sync(project)


def test_dvc_run_cache_never_pairs_params_with_outputs_they_did_not_make(
        project: Project) -> None:
    """A targeted run after an edit, the edit reverted, then applied again: `dvc repro`
    computes the edited analysis (nothing in the run-cache claims to hold it). The stamp, which
    the command writes from the params it read, would come back from a wrong pairing too."""
    k0 = stamped_k(project) + 1  # a value no earlier test ran
    project.edit(k(k0 + 1))
    try:
        project.sh("snakemake", "--cores", "1", "data/params.checked")
    finally:
        project.restore_params()
    project.edit(k(k0 + 1))
    try:
        out = project.sh("dvc", "repro", "eos_gd_sharpness").stdout
        assert "Running stage 'eos_gd_sharpness'" in out, out
        assert stamped_k(project) == k0 + 1
    finally:
        project.restore_params()
    back_in_sync(project)


def test_dvc_experiments_and_checkouts_keep_the_engines_in_agreement(project: Project) -> None:
    """`dvc exp run -S` leaves its outputs in the workspace; after `git checkout params.yaml` both
    engines see that they do not match the params (Snakemake whatever their mtimes). Then
    `dvc checkout` of the committed results, `dvc exp apply`, and back: nothing to do in either,
    each time (Snakemake judges by the stamps that come with the outputs)."""
    k0 = stamped_k(project)
    project.sh("git", "add", "dvc.lock")
    project.sh("git", "commit", "-q", "-m", "results", "--allow-empty")
    project.sh("dvc", "exp", "run", "-n", "k-plus-one", "-S",
               f"studies.eos_gd.analyses.sharpness.k={k0 + 1}", timeout=1200)
    project.restore_params()
    assert stamped_k(project) == k0 + 1
    assert stale_in_both(project) == SHARPNESS_EDIT

    def checkout_head() -> None:
        project.sh("git", "checkout", "--", "params.yaml", "dvc.lock")
        project.sh("dvc", "checkout", "--force")

    checkout_head()
    assert stamped_k(project) == k0
    assert stale_in_both(project) == set()
    project.sh("dvc", "exp", "apply", "k-plus-one")
    assert stamped_k(project) == k0 + 1
    assert stale_in_both(project) == set()
    checkout_head()
    assert stamped_k(project) == k0
    assert stale_in_both(project) == set()
    # the experiment as a branch, checked out as an older or other commit is, and back
    here = project.sh("git", "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    project.sh("dvc", "exp", "branch", "k-plus-one", "k-plus-one-branch")
    for branch, want in (("k-plus-one-branch", k0 + 1), (here, k0)):
        project.sh("git", "checkout", "-q", branch)
        project.sh("dvc", "checkout", "--force")
        assert stamped_k(project) == want
        assert stale_in_both(project) == set()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_run_interrupted_with_sigint_records_only_what_finished(project: Project) -> None:
    """Ctrl-C in the middle of a run: the job it stops leaves no stamp, so both engines still
    want it and what follows; what finished is recorded. The stage prints one line, no
    traceback, and a rerun completes the edit."""
    def lr(raw):
        train = raw["studies"]["random_labels"]["train"]
        train["lr"] = 0.045  # a value no other test runs
        # seconds of training (every step taken) for the signal to land in, not 0.6 s
        train.update(max_steps=30000, stop_at_train_acc=None)
    project.edit(lr)
    try:
        log = project.root / "logs/sigint-run.txt"
        train_log = project.root / "logs/random_labels/train_s0-9.log"
        train_log.unlink(missing_ok=True)  # an earlier run's copy holds the line waited for
        with log.open("w") as out:
            # SIGINT as a terminal delivers it, whatever this suite inherited: a shell that
            # starts a command in the background without job control (`(make test &)`, nohup
            # in a script) ignores SIGINT in it and in everything it starts, Snakemake and the
            # stage included, and the signal would be lost (two fresh-clone runs were)
            proc = subprocess.Popen(["snakemake", "--cores", "1"], cwd=project.root,
                                    env=project.env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=_default_sigint)
            deadline = time.monotonic() + 600
            # once the training job has logged that it is training: a signal before (in the
            # scheduler's gap between two jobs, or while the job imports torch) is not Ctrl-C
            # in the middle of a job, and Snakemake may even let it pass
            while "training 3 run(s) of random_labels" not in (
                    train_log.read_text() if train_log.exists() else ""):
                assert proc.poll() is None, ("snakemake finished before the training job "
                                             "started: " + log.read_text())
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            time.sleep(1.0)
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
            assert proc.wait(timeout=600) != 0
        printed = log.read_text()
        log.unlink()
        assert "Traceback" not in printed, printed
        stale = stale_in_both(project)
        assert stale and stale <= {*TRAIN_STAGES, *AFTER_TRAINING}, (stale, printed)
        interrupted = [p for p in (project.root / "logs/random_labels").glob("*.log")
                       if "interrupted" in p.read_text()]
        assert interrupted, printed
        for path in interrupted:
            assert "Traceback" not in path.read_text()
        project.sh("snakemake", "--cores", "2", timeout=1200)
        assert stale_in_both(project) == set()
    finally:
        project.restore_params()
    back_in_sync(project)


def test_an_output_edited_by_hand_is_reported_by_both_engines(project: Project) -> None:
    summary = project.root / "data/eos_gd/summary.json"
    text = summary.read_text()
    summary.write_text(text.replace("{", "{\"edited\": true, ", 1))
    assert stale_in_both(project) == {"eos_gd_aggregate", "report"}
    back_in_sync(project)

    def content(raw: str) -> dict:
        data = json.loads(raw)
        data["provenance"].pop("git_commit")  # earlier tests may have committed since
        return data

    assert content(summary.read_text()) == content(text)


def test_sync_makes_snakemake_agree_after_dvc_runs(project: Project) -> None:
    """genlab sync needs no DVC and no Snakemake pass: it reconciles mtimes with the stamps,
    and a stale stage stays stale."""
    k0 = stamped_k(project)
    project.edit(k(k0 + 1))
    try:
        proc = project.sh("genlab", "sync")
        assert "stages current" in proc.stdout
        assert stale_in_both(project) == SHARPNESS_EDIT
    finally:
        project.restore_params()
    project.sh("genlab", "sync")
    assert stale_in_both(project) == set()


@pytest.mark.parametrize("engine", ["snakemake", "dvc"])
def test_invalid_params_fail_before_any_job_and_change_nothing(project: Project,
                                                              engine: str) -> None:
    before = project.digest()

    def bad(raw):
        raw["studies"]["random_labels"]["train"]["lr"] = -0.1
    project.edit(bad)
    try:
        args = ["snakemake", "--cores", "2"] if engine == "snakemake" else ["dvc", "repro"]
        proc = project.sh(*args, check=False)
        assert proc.returncode != 0
        assert "studies.random_labels.train.lr: must be > 0, got -0.1" in proc.stdout + proc.stderr
    finally:
        project.restore_params()
    after = project.digest()
    # Snakemake keeps a run log of each invocation under .snakemake/log, and the gate run by DVC
    # writes why it refused to its own log; nothing else may change
    logs = {".snakemake/log/", "logs/check_params.log"}
    new = {k for k in after if k not in before and not k.startswith(tuple(logs))}
    assert new == set()
    assert {k: v for k, v in after.items() if k in before and not k.startswith(tuple(logs))} == {
        k: v for k, v in before.items() if not k.startswith(tuple(logs))}
    if engine == "dvc":
        assert "must be > 0, got -0.1" in (project.root / "logs/check_params.log").read_text()


def test_remote_round_trip(project: Project, tmp_path: Path) -> None:
    """push; fresh clone + pull restores everything; nothing to recompute in either engine."""
    project.sh("dvc", "push")
    project.sh("git", "add", "dvc.lock")
    project.sh("git", "commit", "-q", "-m", "results")
    clone = tmp_path / "clone"
    project.sh("git", "clone", "-q", str(project.root), str(clone))
    pulled = Project(clone, project.env)
    pulled.sh("dvc", "pull")
    def shared(p: Project) -> dict[str, str]:
        # Snakemake's folder markers are the workspace's own, kept out of DVC (.dvcignore)
        return {k: v for k, v in p.digest().items()
                if k.startswith(("data/", "reports/")) and not k.endswith(SNAKEMAKE_MARKER)}

    assert shared(pulled) == shared(project)
    assert pulled.sh("dvc", "status", "--json").stdout.strip() == "{}"
    assert pulled.dvc_repro() == set()
    pulled.sh("genlab", "sync")
    assert pulled.snakemake_plan() == set()


def test_engines_benchmark_measures_and_leaves_the_workspace_as_it_found_it(
        project: Project, tmp_path: Path) -> None:
    """benchmarks/engines.py on the ci workspace (one repeat, without the minutes-long old sync):
    every figure measured, and afterwards both engines still have nothing to do."""
    out = tmp_path / "engines.json"
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "engines.py"
    printed = project.sh("python", str(script), "--project", str(project.root), "--repeat", "1",
                         "--no-old-sync", "--json", str(out), timeout=1200).stdout
    record = json.loads(out.read_text())
    from genlab.workflow.adapter import dvc_jobs

    assert record["stages"] == len(dvc_jobs(project.root))
    figures = record["figures"]
    assert set(figures) == {"noop_snakemake", "noop_dvc_status", "record_full", "record_one",
                            "sync"}
    assert all(f["new_s"] > 0 for f in figures.values())
    assert figures["record_full"]["old_s"] > 0 and figures["sync"]["old_s"] is None
    assert "record_one" in printed
    assert stale_in_both(project) == set()
