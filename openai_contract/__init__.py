"""What the harness and the reference gateway both take as given and neither owns: OpenAI's
request description (`request_schema`, derived from the installed `openai` SDK) and its bounds
(`openai_bounds`, extracted from OpenAI's OpenAPI description), the 400 a body that breaks it
gets (`violations`), and the bounded reading of the untrusted documents (`documents`), request
bodies (`request_body`) and JSON on the wire (`strict_json`) both read. It imports neither of them."""
