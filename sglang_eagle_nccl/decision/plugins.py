"""Whose native NCCL plugins a process loads: ``NCCL_ENV_PLUGIN`` and ``NCCL_TUNER_PLUGIN``.

Decided at activation from this process's own installation (cheap: no library is loaded here);
written with the profile, all or nothing, by activation. A plugin of the user's own in a variable
the plugin needs is refused: NCCL loads one env and one tuner plugin, and a profile the user asked
for must not silently lose to another. The tuner is needed only for ``[[tuner.rules]]``; without
them the user's tuner plugin is kept.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping
    from typing import Any

ENV_PLUGIN = "NCCL_ENV_PLUGIN"
TUNER_PLUGIN = "NCCL_TUNER_PLUGIN"
PLUGIN_VARS = (ENV_PLUGIN, TUNER_PLUGIN)


def plugin_env(data: "Mapping[str, Any]", environ: "Mapping[str, str]",
               profile_env: "Mapping[str, str] | None" = None) -> dict[str, str | None]:
    """``NCCL_ENV_PLUGIN`` / ``NCCL_TUNER_PLUGIN`` for this process (None: unset); raises ProfileError.

    ``profile_env``: what the profile sets in this process (:func:`~sglang_eagle_nccl.decision.plan.process_env`).
    The env plugin is always this installation's. The tuner plugin is ours only when the profile
    has ``[[tuner.rules]]``; without rules ``NCCL_TUNER_PLUGIN`` is the user's to choose, from the
    profile (validated like every library path) or the environment, and is left as it is.
    The CLI's ``validate``, ``env`` and ``doctor`` call this through :func:`~sglang_eagle_nccl.decision.plan.plan`.
    """
    from sglang_eagle_nccl.contract.native_location import is_ours, library_file, present

    rules = bool(data.get("tuner_rules"))
    wanted_tuner = (profile_env or {}).get(TUNER_PLUGIN)
    if present():
        for var in PLUGIN_VARS:
            current = environ.get(var)
            if not current or is_ours(current):
                continue
            if var == TUNER_PLUGIN and not rules:
                continue  # the user's tuner (this profile's own, inherited, or the environment's): NCCL loads it
            from sglang_eagle_nccl.contract.findings import ProfileError, error

            raise ProfileError([
                error(
                    var, current,
                    "another NCCL plugin is set here, but sglang-eagle-nccl loads its own "
                    + ("env plugin (it serves the profile to NCCL and records what NCCL read)" if var == ENV_PLUGIN
                       else "tuner plugin (the profile's [[tuner.rules]] run in it)") + " in every process, and "
                    "NCCL loads only one",
                    f"unset {var} (or uninstall sglang-eagle-nccl to use your own plugin)" if var == ENV_PLUGIN
                    else f"unset {var}, or drop the profile's [[tuner.rules]] to keep your own tuner plugin",
                )
            ])
        lib = library_file()
        out: dict[str, str | None] = {ENV_PLUGIN: lib}
        if rules:
            out[TUNER_PLUGIN] = lib
        elif wanted_tuner:
            out[TUNER_PLUGIN] = wanted_tuner
        elif environ.get(TUNER_PLUGIN) and is_ours(environ[TUNER_PLUGIN]):
            out[TUNER_PLUGIN] = None  # ours, inherited from a launch with rules: not this profile's
        return out
    if rules:
        from sglang_eagle_nccl.contract.findings import ProfileError, error
        from sglang_eagle_nccl.native.library import status

        raise ProfileError([
            error(
                "tuner.rules", None,
                f"the profile has [[tuner.rules]] but the native tuner plugin is not available here: {status()[1]}",
                "install sglang-eagle-nccl from a wheel built with a C compiler, or drop the [[tuner.rules]]",
            )
        ])
    # No library in this installation: NCCL reads the environment itself. An inherited path to a
    # copy of ours elsewhere (a parent in another venv) must not be loaded here.
    return {var: None for var in PLUGIN_VARS if environ.get(var) and is_ours(environ[var])}
