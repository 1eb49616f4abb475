"""Models built from settings through one registry, saved as safetensors + model.json."""
