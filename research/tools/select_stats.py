"""How `research/patches/select_discount.patch` chose its discount in each run: from the runs' TensorBoard logs
(charts/select_gamma, charts/select_lambda and select/lL_g1.0, the running score of the candidate the others are
measured against: gamma 1 at the largest lambda L), the number of iterations whose (gamma, lambda) differs from the
one before, the share of iterations where that candidate's running cross-half product (an estimate of the
undiscounted gradient's squared norm, >= 0 in expectation) is negative, and the choices over the second half of the
run.

    python research/tools/select_stats.py 'runs/MinAtar_*__p3o_h128_2m_select__*'
"""

import collections
import glob
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main(patterns):
    for folder in sorted(f for pattern in patterns for f in glob.glob(pattern)):
        events = EventAccumulator(folder, size_guidance={"scalars": 0})
        events.Reload()
        truth_tag = max((t for t in events.Tags()["scalars"] if t.startswith("select/l") and t.endswith("_g1.0")),
                        key=lambda t: float(t[len("select/l"):-len("_g1.0")]))
        gammas, lambdas, truth = ([e.value for e in events.Scalars(tag)] for tag in
                                  ("charts/select_gamma", "charts/select_lambda", truth_tag))
        choices = list(zip(gammas, lambdas))
        changes = sum(a != b for a, b in zip(choices, choices[1:]))
        negative = sum(t < 0 for t in truth) / len(truth)
        half = len(choices) // 2
        print(f"{folder.rstrip('/').split('/')[-1]} iters {len(choices)}, changes {changes}, "
              f"truth's running cross < 0 in {negative:.0%}")
        print("  2nd half gamma", dict(sorted(collections.Counter(round(g, 3) for g in gammas[half:]).items())),
              "lambda", dict(sorted(collections.Counter(round(x, 2) for x in lambdas[half:]).items())))


if __name__ == "__main__":
    main(sys.argv[1:])
