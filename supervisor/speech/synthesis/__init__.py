"""A request's synthesis: its text as read (`script`), its `plan` (chunks, prompts, `cost`,
`continuity`), the `runner` that submits and hears it, and the `steps` every route takes."""
