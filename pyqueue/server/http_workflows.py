"""Workflows over HTTP/JSON (docs/http.md, "Workflows"): what `client.enqueue_workflow` takes,
written as JSON for producers without the Python client. A step is one of:

- a job: the object `POST /v1/jobs` takes, with `"fresh": true` to ignore what the step before
  hands it;
- a chain, `{"chain": [step, ...]}`: each step starts once the one before has completed, given
  its result;
- a group (a batch), `{"group": [member, ...], "on_success": step, "on_complete": step, "name":
  ..., "keep": seconds}`, a member being a job or a chain of jobs; a step after it (a chord) is
  the next step of a chain.

The JSON becomes the client's own `Task`, `Chain` and `Group`, so both front doors check a
workflow the same way before the server checks it again.
"""

from typing import Any

from pyqueue.client.workflows import Chain, Group, Task
from pyqueue.errors import ResourceExhausted
from pyqueue.server.http_api_fields import BadRequest, job_spec, number

MAX_DEPTH = 32  # steps within steps: deeper is a mistake, or an attempt on the parser's stack
_GROUP_FIELDS = {"group", "on_success", "on_complete", "name", "keep"}


def workflow_step(value: Any, max_jobs: int) -> Task | Chain | Group:
    """The workflow `value` describes; BadRequest says where in it what is wrong, and reading
    stops past `max_jobs` jobs (--max-workflow-jobs), which the server would refuse anyway."""
    return _Reader(max_jobs).step(value, "the workflow", 0)


class _Reader:
    def __init__(self, max_jobs: int) -> None:
        self.max_jobs = max_jobs
        self.jobs = 0

    def step(self, value: Any, where: str, depth: int) -> Task | Chain | Group:
        if depth > MAX_DEPTH:
            raise BadRequest(f"{where}: steps are nested more than {MAX_DEPTH} deep")
        if not isinstance(value, dict):
            raise BadRequest(
                f'{where}: a step is a JSON object: a job, {{"chain": [...]}} or {{"group": [...]}}'
            )
        if "chain" in value:
            return self.chain(value, where, depth)
        if "group" in value:
            return self.group(value, where, depth)
        return self.task(value, where)

    def chain(self, value: dict[str, Any], where: str, depth: int) -> Chain:
        if set(value) != {"chain"}:
            raise BadRequest(
                f'{where}: a chain has only "chain" (found {", ".join(sorted(set(value) - {"chain"}))})'
            )
        steps = value["chain"]
        if not isinstance(steps, list) or not steps:
            raise BadRequest(f'{where}: "chain" is a list of at least one step')
        return Chain(*(self.step(s, f"{where}, chain step {i}", depth + 1) for i, s in enumerate(steps)))

    def group(self, value: dict[str, Any], where: str, depth: int) -> Group:
        unknown = set(value) - _GROUP_FIELDS
        if unknown:
            raise BadRequest(
                f"{where}: unknown fields of a group {', '.join(sorted(unknown))}; known: {', '.join(sorted(_GROUP_FIELDS))}"
            )
        members = value["group"]
        if not isinstance(members, list):
            raise BadRequest(f'{where}: "group" is a list of jobs')
        tasks: list[Task | Chain] = []
        for i, member in enumerate(members):
            at = f"{where}, member {i}"
            if isinstance(member, dict) and "group" in member:
                raise BadRequest(f"{at}: a member is a job or a chain of jobs, not a group")
            step = self.step(member, at, depth + 1)
            if isinstance(step, Chain) and not all(isinstance(s, Task) for s in step.steps):
                raise BadRequest(f"{at}: a member is a job or a chain of jobs, not a group")
            assert not isinstance(step, Group)
            tasks.append(step)
        callbacks = {
            name: self.step(value[name], f"{where}, {name}", depth + 1)
            for name in ("on_success", "on_complete")
            if value.get(name) is not None
        }
        name = value.get("name", "")
        if not isinstance(name, str):
            raise BadRequest(f'{where}: "name" is a string')
        keep = value.get("keep")
        if keep is not None and not number(keep):
            raise BadRequest(f'{where}: "keep" is a finite number of seconds')
        try:
            return Group(tasks, name=name, keep=keep, **callbacks)
        except TypeError as exc:  # a callback that is a group
            raise BadRequest(f"{where}: {exc}") from None

    def task(self, value: Any, where: str) -> Task:
        if not isinstance(value, dict):
            raise BadRequest(f'{where}: a job is a JSON object with a string "type"')
        fresh = value.get("fresh", False)
        if not isinstance(fresh, bool):
            raise BadRequest(f'{where}: "fresh" is true or false')
        self.jobs += 1
        if self.jobs > self.max_jobs:
            raise ResourceExhausted(
                f"the workflow has more than {self.max_jobs} jobs (--max-workflow-jobs): open the batch "
                "with fewer and add the rest to it (AddToBatch)"
            )
        return Task(job_spec(where, {k: v for k, v in value.items() if k != "fresh"}), fresh=fresh)
