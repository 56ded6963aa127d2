"""The system under test: SGLang-style prefix caches with re-injectable incidents."""
