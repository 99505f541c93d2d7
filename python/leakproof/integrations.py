"""leakproof.integrations — one-line callbacks for training frameworks.

Each callback marks steps and epochs, sends the framework's logged numbers
as metrics, and turns leakproof's stop request (a soft memory limit, a
restart schedule: see leakproof.stop_requested()) into the framework's own
"stop training" flag, so the framework ends training at a step boundary::

    from leakproof.integrations import KerasCallback
    model.fit(x, y, epochs=10, callbacks=[KerasCallback()])

    from leakproof.integrations import LightningCallback
    trainer = lightning.pytorch.Trainer(callbacks=[LightningCallback()])

    from leakproof.integrations import TransformersCallback
    trainer = transformers.Trainer(..., callbacks=[TransformersCallback()])

| framework | step | epoch | metrics | on a stop request |
|---|---|---|---|---|
| Keras (keras, tf.keras) | on_train_batch_end | on_epoch_end | the epoch's logs | model.stop_training = True |
| PyTorch Lightning | on_train_batch_end | on_train_epoch_end | trainer.callback_metrics at epoch end | trainer.should_stop = True |
| Hugging Face transformers | on_step_end | on_epoch_end | on_log's logs | control.should_save = True and control.should_training_stop = True |

Steps go out unnumbered (the supervisor numbers them, and keeps counting
across restarts); epochs carry the number of epochs completed as the
framework counts them, so a run resumed from a checkpoint goes on from
there. Metrics are the values float() takes (Python numbers, 0-d tensors
and numpy scalars); others are left out.

Importing this module imports no framework. The first use of a class name
(``from leakproof.integrations import KerasCallback``) imports that
framework and builds the class as a subclass of the framework's own
callback base (keras.callbacks.Callback, else tensorflow.keras.callbacks.
Callback; lightning.pytorch.Callback, else pytorch_lightning.Callback;
transformers.TrainerCallback). Where the framework is not installed the
class still exists, on a stand-in base with the same hook methods, so code
that only builds it (or a test driving it as the framework would) runs.

The callbacks install leakproof's stop handler when they are made (call
them in the main thread): from then on the stop signal (SIGTERM by default)
no longer kills the job at once, it sets the flag, and the framework stops
at the end of the current batch. After fit() returns, a script that wants
to survive restarts saves what it needs and exits 0 when
leakproof.stop_requested() is true. Without leakproof every hook does
nothing but return.
"""

import importlib

import leakproof

_built = {}


def _numbers(values):
    """The entries of a logs mapping whose values float() takes."""
    out = {}
    try:
        items = list(values.items())
    except Exception:
        return out
    for name, value in items:
        try:
            out[str(name)] = float(value)
        except Exception:
            continue
    return out


def _import_attr(candidates):
    """The first importable MODULE.ATTR of candidates, or None."""
    for module, attr in candidates:
        try:
            return getattr(importlib.import_module(module), attr)
        except Exception:       # ImportError, or a framework failing to load
            continue
    return None


def _stop_asked(enabled):
    return enabled and leakproof.stop_requested()


# ---- Keras ----

class _KerasInterface:
    """keras.callbacks.Callback's interface, for when Keras is not installed:
    the attributes and hooks a Keras fit() loop uses."""

    def __init__(self):
        self.model = None
        self.params = {}
        self.validation_data = None

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params


for _hook in ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
              "on_train_batch_begin", "on_train_batch_end", "on_test_begin", "on_test_end",
              "on_test_batch_begin", "on_test_batch_end", "on_predict_begin", "on_predict_end",
              "on_predict_batch_begin", "on_predict_batch_end", "on_batch_begin", "on_batch_end"):
    setattr(_KerasInterface, _hook, lambda self, *args, **kwargs: None)


class _KerasHooks:
    """leakproof's part of KerasCallback.

    KerasCallback(stop=True): stop=False leaves the stop signal alone (it
    then kills the job as it would without the callback)."""

    def __init__(self, stop=True):
        super().__init__()
        self._leakproof_stop = bool(stop)
        _stop_asked(self._leakproof_stop)      # install the handler now

    def _leakproof_check_stop(self):
        if _stop_asked(self._leakproof_stop) and self.model is not None:
            self.model.stop_training = True

    def on_train_batch_end(self, batch, logs=None):
        leakproof.step()
        self._leakproof_check_stop()

    def on_epoch_end(self, epoch, logs=None):
        leakproof.epoch(epoch + 1 if isinstance(epoch, int) else None)
        if logs:
            leakproof.metric(**_numbers(logs))
        self._leakproof_check_stop()


def _build_keras():
    base = _import_attr([("keras.callbacks", "Callback"),
                         ("tensorflow.keras.callbacks", "Callback")]) or _KerasInterface
    return type("KerasCallback", (_KerasHooks, base),
                {"__doc__": "Keras callback: steps, epochs, the epoch's logs as metrics; "
                            "a stop request sets model.stop_training.",
                 "__module__": __name__})


# ---- PyTorch Lightning ----

class _LightningInterface:
    """lightning.pytorch.Callback's interface, for when Lightning is not
    installed: every hook the Trainer calls, doing nothing."""


for _hook in ("setup", "teardown", "on_fit_start", "on_fit_end", "on_sanity_check_start",
              "on_sanity_check_end", "on_train_batch_start", "on_train_batch_end",
              "on_train_epoch_start", "on_train_epoch_end", "on_validation_epoch_start",
              "on_validation_epoch_end", "on_test_epoch_start", "on_test_epoch_end",
              "on_predict_epoch_start", "on_predict_epoch_end", "on_validation_batch_start",
              "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end",
              "on_predict_batch_start", "on_predict_batch_end", "on_train_start", "on_train_end",
              "on_validation_start", "on_validation_end", "on_test_start", "on_test_end",
              "on_predict_start", "on_predict_end", "on_exception", "on_save_checkpoint",
              "on_load_checkpoint", "on_before_backward", "on_after_backward",
              "on_before_optimizer_step", "on_before_zero_grad"):
    setattr(_LightningInterface, _hook, lambda self, *args, **kwargs: None)
_LightningInterface.state_dict = lambda self: {}
_LightningInterface.load_state_dict = lambda self, state_dict: None


class _LightningHooks:
    """leakproof's part of LightningCallback. LightningCallback(stop=True)."""

    def __init__(self, stop=True):
        super().__init__()
        self._leakproof_stop = bool(stop)
        _stop_asked(self._leakproof_stop)

    def _leakproof_check_stop(self, trainer):
        if _stop_asked(self._leakproof_stop):
            trainer.should_stop = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args, **kwargs):
        leakproof.step()
        self._leakproof_check_stop(trainer)

    def on_train_epoch_end(self, trainer, pl_module, *args, **kwargs):
        epoch = getattr(trainer, "current_epoch", None)
        leakproof.epoch(epoch + 1 if isinstance(epoch, int) else None)
        metrics = _numbers(getattr(trainer, "callback_metrics", None) or {})
        if metrics:
            leakproof.metric(**metrics)
        self._leakproof_check_stop(trainer)


def _build_lightning():
    base = _import_attr([("lightning.pytorch", "Callback"),
                         ("pytorch_lightning", "Callback")]) or _LightningInterface
    return type("LightningCallback", (_LightningHooks, base),
                {"__doc__": "PyTorch Lightning callback: steps, epochs, callback_metrics; "
                            "a stop request sets trainer.should_stop.",
                 "__module__": __name__})


# ---- Hugging Face transformers ----

class _TransformersInterface:
    """transformers.TrainerCallback's interface, for when transformers is not
    installed: every event the Trainer's CallbackHandler calls, each with
    (args, state, control, **kwargs), doing nothing."""


for _hook in ("on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
              "on_step_begin", "on_pre_optimizer_step", "on_optimizer_step", "on_substep_end",
              "on_step_end", "on_evaluate", "on_predict", "on_save", "on_log",
              "on_prediction_step"):
    setattr(_TransformersInterface, _hook, lambda self, args, state, control, **kwargs: None)


class _TransformersHooks:
    """leakproof's part of TransformersCallback. TransformersCallback(stop=True)."""

    def __init__(self, stop=True):
        super().__init__()
        self._leakproof_stop = bool(stop)
        _stop_asked(self._leakproof_stop)

    def on_step_end(self, args, state, control, **kwargs):
        leakproof.step()
        if _stop_asked(self._leakproof_stop):
            control.should_save = True          # a checkpoint at this step, then stop
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            leakproof.metric(**_numbers(logs))
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        epoch = getattr(state, "epoch", None)
        try:
            leakproof.epoch(int(round(epoch)) if epoch is not None else None)
        except Exception:
            leakproof.epoch()
        return control


def _build_transformers():
    base = _import_attr([("transformers", "TrainerCallback")]) or _TransformersInterface
    return type("TransformersCallback", (_TransformersHooks, base),
                {"__doc__": "transformers TrainerCallback: steps, epochs, logs as metrics; a "
                            "stop request saves a checkpoint and stops the Trainer.",
                 "__module__": __name__})


_BUILDERS = {
    "KerasCallback": _build_keras,
    "LightningCallback": _build_lightning,
    "TransformersCallback": _build_transformers,
}
__all__ = sorted(_BUILDERS)     # built on first use (__getattr__), so not names pyflakes can see


def __getattr__(name):
    """Build a callback class on first use (PEP 562), importing its framework
    only then."""
    builder = _BUILDERS.get(name)
    if builder is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    if name not in _built:
        _built[name] = builder()
    return _built[name]


def __dir__():
    return sorted(list(globals()) + list(_BUILDERS))
