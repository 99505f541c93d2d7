"""The Optuna process of a sweep with method optuna (docs/internals/optuna.md).

    PYTHON DIR/leakproof/_optuna_worker.py leakproof-optuna

Started by `leakproof sweep` (src/sweep/optuna.c) with the Python of the
`optuna` program, as a script (the last word only names it in ps). Optuna's
own Python API behind one JSON request per line on stdin, one JSON reply
per line on stdout, in order:

    {"op": "open", "storage", "study", "direction", "sampler", "sampler_kwargs",
     "pruner", "pruner_kwargs", "seed", "space"[, "password"]}   -> {"ok": true}
    {"op": "ask"}                                     -> {"number": N, "params": {...}}
    {"op": "tell", "number": N, "state": "complete", "value": V}  -> {"ok": true}
    {"op": "tell", "number": N, "state": "fail"}      -> {"ok": true}
    {"op": "tell", "number": N, "state": "pruned"}    -> {"ok": true}
    {"op": "tell", "number": N, "state": "memory", "outcome": "oom"|"skipped"
     [, "predicted_peak_bytes": P][, "budget_bytes": B]}      -> {"ok": true}
    {"op": "report", "number": N, "values": [[STEP, V], ...]}
                        -> {"prune": true|false, "step": S, "value": V} (the last given)

and {"error": "Type: message"} for any request that failed. It ends at the
end of its input. Nothing here runs on import but Optuna's own import: the
tests import it as leakproof._optuna_worker.
"""

import inspect
import json
import sys
import warnings

if __name__ == '__main__' and not getattr(sys.flags, 'safe_path', False) and sys.path:
    sys.path[0] = ''    # as under `python -c`: the working directory first, not this file's

with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    import optuna
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState


MEMORY_ATTR = 'leakproof_memory'


def memory_constraints(trial):
    """The constraint leakproof gives a sampler that takes one
    (constraints_func): infeasible (> 0) for a trial that ran out of memory
    or was skipped as too large, the more the further its predicted peak is
    over its budget; feasible (-1) for any other."""
    m = trial.user_attrs.get(MEMORY_ATTR)
    if not m:
        return (-1.0,)
    peak, budget = m.get('predicted_peak_bytes'), m.get('budget_bytes')
    over = peak / budget - 1.0 if peak and budget else 0.0
    return (1.0 + max(over, 0.0),)


def make(module, kind, name, kwargs, seed):
    """An instance of the class name of module (optuna.samplers, optuna.pruners)
    with kwargs, seed when it takes one and kwargs have none, and for a
    sampler that takes constraints, leakproof's memory constraint."""
    cls = getattr(module, name, None)
    if not inspect.isclass(cls):
        raise ValueError('optuna has no %s named %r' % (kind, name))
    kwargs = dict(kwargs or {})
    params = inspect.signature(cls).parameters
    if seed is not None and 'seed' not in kwargs and 'seed' in params:
        kwargs['seed'] = seed
    if kind == 'sampler' and 'constraints_func' in params and 'constraints_func' not in kwargs:
        kwargs['constraints_func'] = memory_constraints
    return cls(**kwargs)


def report_many(t, values):
    """trial.report() of each (step: value), in one transaction of Optuna's RDB storage when it
    is the one known (Optuna 3.1: about 1 ms a value against 15), else one by one. The values
    go into the storage's cached copy of the trial and into the trial's own (which
    should_prune() reads), as report() puts them; a trial asked before a restart is in no
    cache of this process, and its own copy is then another object."""
    st = t.storage
    one = getattr(getattr(st, '_backend', None), '_set_trial_intermediate_value_without_commit', None)
    if len(values) > 1 and one is not None and hasattr(st, '_get_cached_trial'):
        try:
            from optuna.storages._rdb.storage import _create_scoped_session
            with st._lock:
                cached = st._get_cached_trial(t._trial_id)
                if cached is not None:
                    st._check_trial_is_updatable(cached)
                    iv = dict(cached.intermediate_values)
                    iv.update(values)
                    cached.intermediate_values = iv
            with _create_scoped_session(st._backend.scoped_session, True) as session:
                for step, value in values.items():
                    one(session, t._trial_id, step, value)
            own = getattr(t, '_cached_frozen_trial', None)
            if own is not None and own is not cached:
                iv = dict(own.intermediate_values)
                iv.update(values)
                own.intermediate_values = iv
            return
        except (AttributeError, ImportError, TypeError):
            pass
    for step, value in values.items():
        t.report(value, step)


def open_storage(req):
    """The storage URL of an open request, with its password put in; the
    PostgreSQL schema its search_path names created when it is not there."""
    storage = req['storage']
    if req.get('password') is not None:
        import sqlalchemy.engine
        url = sqlalchemy.engine.make_url(storage).set(password=req['password'])
        storage = url.render_as_string(hide_password=False)
    if storage.startswith('postgresql'):
        import re
        import sqlalchemy
        m = re.search('search_path%3D([A-Za-z_][A-Za-z0-9_]*)', req['storage'])
        if m:
            engine = sqlalchemy.create_engine(storage)
            with engine.begin() as c:
                c.execute(sqlalchemy.text('CREATE SCHEMA IF NOT EXISTS ' + m.group(1)))
            engine.dispose()
    return storage


class Worker:
    """One study, opened by the first request, and the trials asked of it."""

    def __init__(self):
        self.study = None
        self.space = None
        self.asked = {}

    def trial_of(self, number):
        t = self.asked.get(number)
        if t is None:    # asked of a process that has died since
            study = self.study
            tid = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)
            t = self.asked[number] = optuna.trial.Trial(study, tid)
        return t

    def handle(self, req):
        """The reply to one request (a dict); raises when it failed."""
        op = req.get('op')
        if op == 'open':
            sampler = make(optuna.samplers, 'sampler', req['sampler'], req.get('sampler_kwargs'), req.get('seed'))
            pruner = None
            if req.get('pruner'):
                pruner = make(optuna.pruners, 'pruner', req['pruner'], req.get('pruner_kwargs'), None)
            storage = open_storage(req)
            study = optuna.create_study(storage=storage, study_name=req['study'],
                                        direction=req['direction'], sampler=sampler, pruner=pruner,
                                        load_if_exists=True)
            dirs = study.directions
            if len(dirs) != 1:
                raise ValueError('study %r in %r has %d objectives; a leakproof sweep has one'
                                 % (req['study'], req['storage'], len(dirs)))
            if dirs[0].name.lower() != req['direction']:
                raise ValueError('study %r in %r is to %s, but the sweep goal is to %s (give the sweep '
                                 'another study name or storage)' % (req['study'], req['storage'],
                                 dirs[0].name.lower(), req['direction']))
            self.study = study
            self.space = {k: json_to_distribution(json.dumps(v)) for k, v in req['space'].items()}
            return {'ok': True}
        if op == 'ask':
            t = self.study.ask(self.space)
            self.asked[t.number] = t
            return {'number': t.number, 'params': t.params}
        if op == 'report':
            t = self.trial_of(req['number'])
            known = self.study._storage.get_trial(t._trial_id).intermediate_values
            new = {}
            for step, value in req['values']:
                if int(step) not in known and int(step) not in new:
                    new[int(step)] = float(value)
            report_many(t, new)
            last = req['values'][-1] if req['values'] else [None, None]
            return {'prune': bool(t.should_prune()), 'step': last[0], 'value': last[1]}
        if op == 'tell':
            if req.get('state') == 'memory':
                # what does not fit: PRUNED with nothing reported ranks below every
                # complete trial in TPE's split, and the attribute makes it
                # infeasible to a sampler with leakproof's constraint; FAIL
                # would be left out, and the region proposed again
                t = self.trial_of(req['number'])
                if not self.study._storage.get_trial(t._trial_id).state.is_finished():
                    t.set_user_attr(MEMORY_ATTR, {k: req.get(k) for k in
                                                  ('outcome', 'predicted_peak_bytes', 'budget_bytes')})
            self.asked.pop(req['number'], None)
            if req.get('state') == 'complete':
                self.study.tell(req['number'], req['value'], skip_if_finished=True)
            elif req.get('state') in ('pruned', 'memory'):
                self.study.tell(req['number'], state=TrialState.PRUNED, skip_if_finished=True)
            else:
                self.study.tell(req['number'], state=TrialState.FAIL, skip_if_finished=True)
            return {'ok': True}
        raise ValueError('unknown request %r' % (op,))


def serve(lines, out):
    """Answer each request of lines (JSON text) on out, one line each."""
    worker = Worker()
    for line in lines:
        try:
            answer = json.dumps(worker.handle(json.loads(line)))
        except Exception as e:
            answer = json.dumps({'error': '%s: %s' % (type(e).__name__, e)})
        out.write(answer + '\n')
        out.flush()


def main():
    warnings.simplefilter('ignore')
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    serve(sys.stdin, sys.stdout)


if __name__ == '__main__':
    main()
