#!/usr/bin/env python3
"""PyTorch's side of bench_contention: the same MLP step (784-1024-1024-10,
batch 128, ReLU, cross entropy, SGD) under the same competitors, which are
bench_contention itself run with --compete KIND, so both programs face the
same load. Prints the median step time and the ratio to the quiet step of the
same round, per condition, as bench_contention does.

Usage: python3 bench/contention_torch.py build/bench/bench_contention [rounds]
Needs Debian's python3-torch (not installed by scripts/setup.sh)."""
import os
import signal
import statistics
import subprocess
import sys
import time

import torch

CONDITIONS = [("quiet", []), ("1 busy", ["busy"]), ("2 busy", ["busy", "busy"]),
              ("mixed", ["busy", "bursty", "memory"])]
LIMITS = {"1 busy": 2.0, "2 busy": 2.5, "mixed": 3.0}


def mlp_step_fn():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))

    def step():
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def time_condition(step, seconds):
    step()
    samples, t_end = [], time.perf_counter() + seconds
    while len(samples) < 5 or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        step()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    competitor = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {rounds} rounds")
    step = mlp_step_fn()
    for _ in range(3):
        step()
    times = {name: [] for name, _ in CONDITIONS}
    for _ in range(rounds):
        for name, kinds in CONDITIONS:
            procs = [subprocess.Popen([competitor, "--compete", k]) for k in kinds]
            time.sleep(0.2)
            try:
                times[name].append(time_condition(step, 1.0))
            finally:
                for p in procs:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
            time.sleep(0.1)
    quiet = times["quiet"]
    print(f"{'step':<10} {'load':<8} {'median':>12} {'ratio':>10} per round")
    for name, _ in CONDITIONS:
        ratios = [t / q for t, q in zip(times[name], quiet)]
        r = statistics.median(ratios)
        verdict = "" if name == "quiet" else f"  <= {LIMITS[name]:.1f}x: {'met' if r <= LIMITS[name] else 'NOT met'}"
        print(f"{'torch MLP':<10} {name:<8} {statistics.median(times[name]) * 1e3:9.2f} ms {r:9.2f}x "
              f"{' '.join(f'{x:.2f}' for x in ratios)}{verdict}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
