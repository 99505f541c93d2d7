"""
optuna_inprocess.py — the search people run today: an Optuna study in one
process, every trial building its model in that process. The objective
(sweep_train.objective) keeps each trial's model alive across trials, as
Keras sessions and cached graphs do, and the wide configurations need much
memory, so under a memory limit the process dies after a few trials and
takes the whole study with it.

    optuna_inprocess.py STORAGE_URL TRIALS
"""
import os
import sys

import optuna

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_train  # noqa: E402


def main():
    storage, trials = sys.argv[1], int(sys.argv[2])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=storage, study_name="inprocess", direction="minimize",
                                sampler=optuna.samplers.TPESampler(seed=0))

    def objective(trial):
        extra = trial.suggest_categorical("extra_mib", [20, 60, 600])
        lr = trial.suggest_float("lr", 0.01, 0.1, log=True)
        v = sweep_train.objective(64, lr, steps=20, leak_across_calls=True, extra_mib=extra)
        print("trial %d done: extra_mib=%d val_loss=%.4f" % (trial.number, extra, v), flush=True)
        return v

    study.optimize(objective, n_trials=trials)
    print("study finished", flush=True)


if __name__ == "__main__":
    main()
