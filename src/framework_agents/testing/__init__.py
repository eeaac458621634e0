"""Test doubles at the model seam: ``FunctionModel`` and ``ScriptedModel``."""

from .models import FunctionModel, ModelCall, ScriptedModel

__all__ = ["FunctionModel", "ModelCall", "ScriptedModel"]
