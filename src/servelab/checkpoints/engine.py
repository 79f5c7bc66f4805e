"""Checkpoints of the 'engine' course notebook: its solution, step by step.

Generated from solutions/09_serving_your_model_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('engine', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


from servelab.kv.learner_engine import EngineSkeleton


from servelab.carry_forward import stand_in
BlockManager = stand_in('prefix-cache')
Scheduler = stand_in('scheduler')


class ServingEngine(EngineSkeleton):
    block_manager_class = BlockManager  # loaded above: yours from notebook 05, or the stand-in
    scheduler_class = Scheduler  # yours from notebook 04, or the stand-in

    def execute(self, out):
        self.copy([(d.slot.cow_src, d.slot.block) for d in out.decodes if d.slot.cow_src is not None])
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows += self.prefill(p)
        return rows


TOPIC = 'engine'
STEPS = {
    1: lambda: ServingEngine,
}
