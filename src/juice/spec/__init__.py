"""The experiment spec: typed models, the run matrix, duration estimates."""
