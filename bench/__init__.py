"""The research harness: recipes, baselines and the benchmark runner (`python -m bench`, see bench/__main__.py)."""
