"""The framework callbacks of python/leakproof/integrations.py, inside a real
`leakproof run`.

Debian 12 packages none of Keras/TensorFlow, PyTorch Lightning or Hugging
Face transformers, so each callback is tested against its framework's
callback *interface*: a small training loop below calls the hooks with the
arguments, in the order, and with the flag objects the framework's own loop
uses (Keras's fit(): set_model, on_train_batch_end(batch, logs),
on_epoch_end(epoch, logs), `model.stop_training` checked after every batch;
Lightning's fit loop: on_train_batch_end(trainer, pl_module, outputs, batch,
batch_idx), on_train_epoch_end(trainer, pl_module), `trainer.should_stop`,
`trainer.callback_metrics` of 0-d torch tensors; transformers' Trainer:
CallbackHandler events (args, state, control, **kwargs), `control` returned
and used, a checkpoint when `control.should_save`, a stop on
`control.should_training_stop`). Where a framework is installed the
callback subclasses the real base class; the tests check which base was
used, so they say what they tested.

What must reach the supervisor: every step, the epochs, the metrics (read
back from the store's `metrics` table and the CSV report), and a stop
request (`--restart every=N` asks the job to stop after N steps) must set
the framework's stop flag, ending training early at a batch boundary.
"""

import importlib.util
import sqlite3
import subprocess
import textwrap

PYTHON = "/usr/bin/python3"

# Fake training loops, each the shape of its framework's own.
KERAS_JOB = r"""
import os, sys, time, leakproof
from leakproof.integrations import KerasCallback

class Model:                         # what keras.Model exposes to callbacks
    stop_training = False

def fit(model, callbacks, epochs, steps_per_epoch, sleep):
    for cb in callbacks:
        cb.set_model(model)
        cb.set_params({"epochs": epochs, "steps": steps_per_epoch, "verbose": 0})
    for cb in callbacks: cb.on_train_begin({})
    done = 0
    for epoch in range(epochs):
        for cb in callbacks: cb.on_epoch_begin(epoch, {})
        for batch in range(steps_per_epoch):
            for cb in callbacks: cb.on_train_batch_begin(batch, {})
            time.sleep(sleep)
            done += 1
            for cb in callbacks: cb.on_train_batch_end(batch, {"loss": 1.0 / done})
            if model.stop_training:
                break
        logs = {"loss": 1.0 / (epoch + 1), "val_loss": 2.0 / (epoch + 1),
                "lr": 0.5, "note": "not a number"}
        for cb in callbacks: cb.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    for cb in callbacks: cb.on_train_end({})
    return done

epochs, steps, sleep = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if leakproof.restart() > 0:
    print("restarted", flush=True)
    sys.exit(0)
cb = KerasCallback()
print("base", [c.__name__ for c in type(cb).__mro__][2], flush=True)
model = Model()
done = fit(model, [cb], epochs, steps, sleep)
print("batches", done, "stop_training", model.stop_training, flush=True)
"""

LIGHTNING_JOB = r"""
import sys, time, torch, leakproof
from leakproof.integrations import LightningCallback

class Trainer:                       # what lightning.pytorch.Trainer exposes
    def __init__(self, callbacks, max_epochs):
        self.callbacks, self.max_epochs = callbacks, max_epochs
        self.should_stop = False
        self.current_epoch = 0
        self.global_step = 0
        self.callback_metrics = {}

    def fit(self, module, batches, sleep):
        for cb in self.callbacks: cb.setup(self, module, stage="fit")
        for cb in self.callbacks: cb.on_fit_start(self, module)
        for cb in self.callbacks: cb.on_train_start(self, module)
        while self.current_epoch < self.max_epochs and not self.should_stop:
            for cb in self.callbacks: cb.on_train_epoch_start(self, module)
            for batch_idx in range(batches):
                batch = torch.ones(4)
                for cb in self.callbacks: cb.on_train_batch_start(self, module, batch, batch_idx)
                time.sleep(sleep)
                loss = torch.tensor(1.0 / (self.global_step + 1))
                self.global_step += 1
                self.callback_metrics["train_loss"] = loss
                for cb in self.callbacks:
                    cb.on_train_batch_end(self, module, {"loss": loss}, batch, batch_idx)
                if self.should_stop:
                    break
            self.callback_metrics["val_acc"] = torch.tensor(0.25 * (self.current_epoch + 1))
            self.callback_metrics["per_class"] = torch.ones(3)     # not a scalar: left out
            for cb in self.callbacks: cb.on_train_epoch_end(self, module)
            self.current_epoch += 1
        for cb in self.callbacks: cb.on_train_end(self, module)
        for cb in self.callbacks: cb.on_fit_end(self, module)
        for cb in self.callbacks: cb.teardown(self, module, stage="fit")

max_epochs, batches, sleep = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if leakproof.restart() > 0:
    print("restarted", flush=True)
    sys.exit(0)
cb = LightningCallback()
print("base", [c.__name__ for c in type(cb).__mro__][2], flush=True)
trainer = Trainer([cb], max_epochs)
trainer.fit(torch.nn.Linear(4, 1), batches, sleep)
print("batches", trainer.global_step, "should_stop", trainer.should_stop, flush=True)
"""

TRANSFORMERS_JOB = r"""
import os, sys, time, leakproof
from leakproof.integrations import TransformersCallback

class TrainerControl:                # transformers.TrainerControl's flags
    def __init__(self):
        self.should_training_stop = False
        self.should_epoch_stop = False
        self.should_save = False
        self.should_evaluate = False
        self.should_log = False

class TrainerState:
    def __init__(self):
        self.epoch = 0.0
        self.global_step = 0
        self.max_steps = 0
        self.log_history = []

class Args:
    logging_steps = 2
    output_dir = "out"

class CallbackHandler:               # transformers.trainer_callback.CallbackHandler
    def __init__(self, callbacks):
        self.callbacks = callbacks
    def call_event(self, event, args, state, control, **kwargs):
        for cb in self.callbacks:
            result = getattr(cb, event)(args, state, control, model=None, **kwargs)
            if result is not None:
                control = result
        return control

def train(handler, epochs, steps_per_epoch, sleep):
    args, state, control = Args(), TrainerState(), TrainerControl()
    state.max_steps = epochs * steps_per_epoch
    control = handler.call_event("on_init_end", args, state, control)
    control = handler.call_event("on_train_begin", args, state, control)
    for epoch in range(epochs):
        control = handler.call_event("on_epoch_begin", args, state, control)
        for step in range(steps_per_epoch):
            control = handler.call_event("on_step_begin", args, state, control)
            time.sleep(sleep)
            state.global_step += 1
            state.epoch = epoch + (step + 1) / steps_per_epoch
            control = handler.call_event("on_step_end", args, state, control)
            if state.global_step % args.logging_steps == 0:      # _maybe_log_save_evaluate
                logs = {"loss": 1.0 / state.global_step, "learning_rate": 5e-05,
                        "epoch": state.epoch}
                state.log_history.append(logs)
                control = handler.call_event("on_log", args, state, control, logs=logs)
            if control.should_save:
                os.makedirs("out/checkpoint-%d" % state.global_step)
                control.should_save = False
                control = handler.call_event("on_save", args, state, control)
            if control.should_epoch_stop or control.should_training_stop:
                break
        control = handler.call_event("on_epoch_end", args, state, control)
        if control.should_training_stop:
            break
    control = handler.call_event("on_train_end", args, state, control)
    return state, control

epochs, steps, sleep = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if leakproof.restart() > 0:
    print("restarted", flush=True)
    sys.exit(0)
cb = TransformersCallback()
print("base", [c.__name__ for c in type(cb).__mro__][2], flush=True)
state, control = train(CallbackHandler([cb]), epochs, steps, sleep)
print("batches", state.global_step, "should_training_stop", control.should_training_stop,
      "checkpoints", sorted(os.listdir("out")) if os.path.isdir("out") else [], flush=True)
"""

# The base class each callback gets: the framework's where it is installed.
BASES = {
    "keras": ("Callback" if importlib.util.find_spec("keras") or importlib.util.find_spec("tensorflow")
              else "_KerasInterface"),
    "lightning": ("Callback" if importlib.util.find_spec("lightning") or
                  importlib.util.find_spec("pytorch_lightning") else "_LightningInterface"),
    "transformers": ("TrainerCallback" if importlib.util.find_spec("transformers")
                     else "_TransformersInterface"),
}


def write_job(lp, name, text):
    path = lp.dir / name
    path.write_text(text)
    return str(path)


def job_output(r):
    """The job's stdout as {first word: rest}."""
    out = {}
    for line in r.out.splitlines():
        word, _, rest = line.partition(" ")
        out[word] = rest
    return out


def metrics(lp):
    with sqlite3.connect(lp.store) as db:
        return db.execute("SELECT name, value FROM metrics ORDER BY t, rowid").fetchall()


def epochs(lp):
    """The details of the store's epoch events, in order."""
    with sqlite3.connect(lp.store) as db:
        return [d for (d,) in db.execute("SELECT detail FROM events WHERE kind = 'epoch' ORDER BY t")]


def csv_steps(lp):
    """[(step, epoch)] from `report --format csv`."""
    lines = lp.report(fmt="csv").splitlines()
    assert lines[0].startswith("step,epoch,"), lines[:3]
    rows = [line.split(",") for line in lines[1:]]
    return [(int(r[0]), int(r[1]) if r[1] else None) for r in rows if r[0]]


def test_importing_the_client_imports_no_framework():
    code = textwrap.dedent("""
        import sys, leakproof, leakproof.integrations as li
        heavy = ("keras", "tensorflow", "torch", "lightning", "pytorch_lightning",
                 "transformers", "numpy")
        print(sorted(m for m in heavy if m in sys.modules))
        print(sorted(n for n in dir(li) if n.endswith("Callback")))
        cls = li.KerasCallback
        print(cls.__name__, li.KerasCallback is cls)
        try:
            li.NoSuchCallback
        except AttributeError as e:
            print("AttributeError", e)
    """)
    from pathlib import Path
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "python")}
    r = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "[]", lines
    assert lines[1] == "['KerasCallback', 'LightningCallback', 'TransformersCallback']"
    assert lines[2] == "KerasCallback True"
    assert lines[3].startswith("AttributeError") and "NoSuchCallback" in lines[3]


def test_keras_steps_epochs_metrics(lp):
    job = write_job(lp, "keras_job.py", KERAS_JOB)
    r = lp.run([PYTHON, job, "3", "4", "0"])
    assert r.rc == 0, r
    out = job_output(r)
    assert out["base"] == BASES["keras"], r.out
    assert out["batches"] == "12 stop_training False", r.out
    rep = lp.report()
    assert rep["run"]["step_source"] == "channel"
    assert rep["steps"] == 12, lp.describe(rep)
    # a step carries the last epoch ended before it; epoch N ends after step 4N
    assert csv_steps(lp) == [(s, (s - 1) // 4 or None) for s in range(1, 13)]
    assert epochs(lp) == ["1", "2", "3"]
    assert metrics(lp) == [("loss", 1.0), ("val_loss", 2.0), ("lr", 0.5),
                           ("loss", 0.5), ("val_loss", 1.0), ("lr", 0.5),
                           ("loss", 1 / 3), ("val_loss", 2 / 3), ("lr", 0.5)]


def test_keras_stop_request_sets_stop_training(lp):
    job = write_job(lp, "keras_job.py", KERAS_JOB)
    r = lp.run([PYTHON, job, "1", "200", "0.01"], "--restart", "every=5", "--max-restarts", "1",
               timeout=120)
    assert r.rc == 0, r
    out = job_output(r)
    batches, _, flag = out["batches"].split()
    assert flag == "True", r.out            # the framework's own stop flag
    assert 5 <= int(batches) < 200, r.out   # stopped at a batch boundary, early
    assert "restarted" in out, r.out
    rep = lp.report()
    seg = rep["segments"][0]
    assert (seg["cause"], seg["restart"]) == ("stop-requested", "every"), rep["segments"]
    assert seg["exit_code"] == 0 and seg["exit_signal"] is None, seg
    assert rep["steps"] == int(batches), lp.describe(rep)


def test_lightning_steps_epochs_metrics(lp):
    job = write_job(lp, "lightning_job.py", LIGHTNING_JOB)
    r = lp.run([PYTHON, job, "2", "3", "0"], timeout=120)
    assert r.rc == 0, r
    out = job_output(r)
    assert out["base"] == BASES["lightning"], r.out
    assert out["batches"] == "6 should_stop False", r.out
    assert lp.report()["steps"] == 6
    assert csv_steps(lp) == [(1, None), (2, None), (3, None), (4, 1), (5, 1), (6, 1)]
    assert epochs(lp) == ["1", "2"]
    got = metrics(lp)
    assert [(n, round(v, 6)) for n, v in got] == [("train_loss", round(1 / 3, 6)), ("val_acc", 0.25),
                                                 ("train_loss", round(1 / 6, 6)), ("val_acc", 0.5)]


def test_lightning_stop_request_sets_should_stop(lp):
    job = write_job(lp, "lightning_job.py", LIGHTNING_JOB)
    r = lp.run([PYTHON, job, "1", "300", "0.01"], "--restart", "every=4", "--max-restarts", "1",
               timeout=120)
    assert r.rc == 0, r
    out = job_output(r)
    batches, _, flag = out["batches"].split()
    assert flag == "True" and 4 <= int(batches) < 300, r.out
    assert "restarted" in out, r.out
    seg = lp.report()["segments"][0]
    assert (seg["cause"], seg["restart"], seg["exit_code"]) == ("stop-requested", "every", 0), seg


def test_transformers_steps_epochs_metrics(lp):
    job = write_job(lp, "hf_job.py", TRANSFORMERS_JOB)
    r = lp.run([PYTHON, job, "2", "4", "0"])
    assert r.rc == 0, r
    out = job_output(r)
    assert out["base"] == BASES["transformers"], r.out
    assert out["batches"] == "8 should_training_stop False checkpoints []", r.out
    assert lp.report()["steps"] == 8
    assert csv_steps(lp) == [(s, (s - 1) // 4 or None) for s in range(1, 9)]
    assert epochs(lp) == ["1", "2"]
    want = []
    for step in (2, 4, 6, 8):
        want += [("loss", 1 / step), ("learning_rate", 5e-05), ("epoch", step / 4)]
    assert metrics(lp) == want


def test_transformers_stop_request_saves_and_stops(lp):
    job = write_job(lp, "hf_job.py", TRANSFORMERS_JOB)
    r = lp.run([PYTHON, job, "1", "300", "0.01"], "--restart", "every=6", "--max-restarts", "1",
               timeout=120)
    assert r.rc == 0, r
    out = job_output(r)
    words = out["batches"].split()
    batches = int(words[0])
    assert words[1:3] == ["should_training_stop", "True"] and 6 <= batches < 300, r.out
    # the Trainer saved a checkpoint at the step it stopped at
    assert out["batches"].endswith("checkpoints ['checkpoint-%d']" % batches), r.out
    assert "restarted" in out, r.out
    seg = lp.report()["segments"][0]
    assert (seg["cause"], seg["restart"], seg["exit_code"]) == ("stop-requested", "every", 0), seg


def test_callbacks_do_nothing_without_leakproof(tmp_path):
    # The same jobs outside leakproof: training runs to the end, nothing raises.
    from pathlib import Path
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "python")}
    for name, text, want in (("k.py", KERAS_JOB, "batches 6 stop_training False"),
                             ("h.py", TRANSFORMERS_JOB,
                              "batches 6 should_training_stop False checkpoints []")):
        path = tmp_path / name
        path.write_text(text)
        r = subprocess.run([PYTHON, str(path), "2", "3", "0"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert want in r.stdout.splitlines(), r.stdout
