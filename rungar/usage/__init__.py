"""Per-repository accounting: what each job Rungar served cost in runner time and money."""
