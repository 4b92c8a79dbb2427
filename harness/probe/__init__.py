"""`parity probe`: request probes generated from OpenAI's request description
(`reference_impl.request_schema`), each a valid request with one defect, sent to two targets
whose answers are compared at the error-contract level: `generate` makes the probes, `send`
sends them and reduces each answer to its `Outcome`, `answers` keeps a target's outcomes in a
folder, `compare` finds and groups the divergences, `report` writes them for people and
machines."""
