"""`parity probe`: request probes generated from OpenAI's request description
(`openai_contract.request_schema`), each a valid request with one defect, sent to two targets
whose answers are compared at the error-contract level: `surfaces` says what is probed (every
endpoint family's bodies, routes and query parameters), `generate` makes the probes (`forms` the
uploads), `objects` creates what they name on the target, `send` sends them and reduces each
answer to its `Outcome`, `answers` keeps a target's outcomes in a folder, `compare` finds and
groups the divergences, `report` writes them for people and machines, `parts` puts the parts of
a run split over machines (`--shard I/N`) back together, and `verdict` judges one target's
answers against OpenAI's description alone."""
