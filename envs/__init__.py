"""Env modules for the scripts' `--env-id module.path:Name-v0` path: each registers its Gymnasium ids when imported."""
