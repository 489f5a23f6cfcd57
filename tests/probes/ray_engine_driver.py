"""A Ray driver that runs SGLang's RayEngine on an existing cluster (tests/ray).

    python ray_engine_driver.py CONFIG.json

CONFIG: ``address`` (the cluster), ``job_env_vars`` (the job's runtime_env env_vars: what a user passes
to ``ray.init``), ``engine`` (RayEngine keyword arguments), optional ``bundles`` (a placement group of
the driver's own: the custom-group path) and ``prompt`` / ``max_new_tokens``. Prints one JSON line:
the generated token ids and the driver's Ray node, or the error RayEngine raised. ``backend``
``"offline_throughput"`` runs SGLang's offline benchmark's Ray backend instead of RayEngine itself. The plugin is
enabled (or not) by this process's own environment: the test decides.
"""

import json
import sys
import traceback


def main(config: dict) -> dict:
    import ray

    ray.init(
        address=config["address"],
        runtime_env={"env_vars": config.get("job_env_vars", {})},
        log_to_driver=True,
    )
    out: dict = {"driver_node": ray.get_runtime_context().get_node_id()}
    kwargs = dict(config["engine"])
    pg = None
    if config.get("bundles"):
        from ray.util.placement_group import placement_group

        pg = placement_group(config["bundles"], strategy=config.get("strategy", "STRICT_SPREAD"))
        ray.get(pg.ready(), timeout=120)
        kwargs["placement_group"] = pg
    if config.get("backend") == "offline_throughput":
        # SGLang's offline benchmark on Ray: RayEngine inside an engine actor of its own placement group.
        from sglang.benchmark import offline_throughput
        from sglang.srt.server_args import ServerArgs

        def make():
            server_args = ServerArgs(**kwargs)
            server_args.resolve_once()  # as the benchmark's CLI does before it creates the backend
            return offline_throughput._create_ray_engine_backend(server_args)
    else:
        from sglang.srt.ray.engine import RayEngine

        def make():
            return RayEngine(**kwargs)

    try:
        engine = make()
    except BaseException as exc:  # noqa: BLE001 - the test reads what the driver saw
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-4000:]
        return out
    try:
        answer = engine.generate(
            input_ids=config.get("prompt", [1, 17, 33, 71]),
            sampling_params={"max_new_tokens": config.get("max_new_tokens", 4), "temperature": 0},
        )
        out["output_ids"] = answer["output_ids"]
    finally:
        engine.shutdown()
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        result = main(json.load(fh))
    print("RESULT " + json.dumps(result), flush=True)
