"""Read serving-engine and GPU metrics into one ``Snapshot`` (``kg.inputs.metrics.load.load_snapshot``).

One module per job: ``snapshot`` (the model), ``detect`` (format detection), one reader per
format (``prometheus``, ``smi_csv``, ``dmon``, ``capture``, ``dcgm_fields``), ``load`` (files,
merging, deltas).

Inputs (format auto-detected from the content, never from the file name):

- Prometheus text exposition (``GET /metrics``) of vLLM (``vllm:*``, also ``ray_vllm:*``), SGLang
  (``sglang:*``), NVIDIA dcgm-exporter (``DCGM_FI_*``) and utkuozdemir/nvidia_gpu_exporter
  (``nvidia_smi_*``). Parsed with ``prometheus_client.parser.text_string_to_metric_families``.
- ``nvidia-smi --query-gpu=... --format=csv`` output (with or without ``nounits``; ``[N/A]`` is "not
  reported").
- ``nvidia-smi dmon`` output (``# gpu pwr ... sm mem ...`` header, one row per sample and GPU;
  samples are averaged).
- an nvidia_gpu_exporter capture (``internal/captures/*.txt``): its ``<phase> :: query-gpu`` and
  ``<phase> :: dmon`` sections are read for the phase asked for (``load`` or ``idle``).
- a dcgm-exporter collector field list (``etc/default-counters.csv``, ``dcp-metrics-included.csv``):
  no readings, but it tells which fields the exporter is set to collect (commented-out = off).

Every metric a parser knows is mapped through one table (``PROM_METRICS``, ``SMI_FIELDS``,
``DMON_COLUMNS``) to a canonical reading with a unit in its name; anything else is kept in
``Snapshot.unknown_metrics`` (``optkg diagnose --verbose`` lists it). Names, meanings and units
come from ``shared/data/metrics/METRIC_NAMES.md`` (vLLM docs/design/metrics.md, SGLang HELP
strings, dcgm-exporter etc/*.csv, dcgm_fields.h, ``nvidia-smi --help-query-gpu``).

Canonical readings and units:

- serving engine (one per engine, series summed or maxed over ``engine``/``tp_rank`` labels):
  ``requests_running``, ``requests_waiting`` (requests), ``kv_cache_usage`` (fraction 0-1),
  ``preemptions_total`` (count, counter), ``retracted_requests`` (requests, SGLang gauge),
  ``prompt_tokens_total``/``generation_tokens_total`` (tokens, counters),
  ``prefix_cache_queries_total``/``prefix_cache_hits_total`` (tokens, counters),
  ``prefix_cache_hit_rate`` (fraction, SGLang gauge), ``generation_tokens_per_s`` (tokens/s gauge),
  ``requests_finished_total``/``requests_aborted_total`` (requests), ``kv_capacity_tokens``,
  histograms ``ttft_seconds``, ``itl_seconds``, ``e2e_latency_seconds``, ``queue_time_seconds``,
  ``prompt_length_tokens``, ``generation_length_tokens``; ``config`` (block_size, cache_dtype,
  num_gpu_blocks, gpu_memory_utilization, enable_prefix_caching from ``vllm:cache_config_info``).
- GPU device (key ``"<index>"`` or ``"<index>/mig<GPU_I_ID>"``): ``gpu_util`` (fraction, time-based:
  a kernel was running), ``gr_engine_active``, ``sm_active``, ``sm_occupancy``, ``tensor_active``,
  ``dram_active`` (fractions, DCGM profiling), ``mem_copy_util`` (fraction, coarse bandwidth proxy),
  ``encoder_util``/``decoder_util`` (fractions), ``fb_used_mib``/``fb_free_mib``/``fb_total_mib``/
  ``fb_reserved_mib`` (MiB), ``power_w``/``power_limit_w`` (W), ``sm_clock_mhz`` (MHz).

Two scrapes of the same endpoint (``before`` and ``after``) turn counters and histograms into
window deltas (``Snapshot.deltas``); with a window length (``window_s``, or sample timestamps)
also into per-second rates.

Errors: a malformed file is one ``OptkgError`` naming the file and line (``path:line: ...``). A
reading that parses but cannot be true (NaN, infinite, negative, or a utilisation outside 0-1 after
scaling) does not fail the file: DCGM emits such values now and then (NVIDIA/DCGM issues 152 and
199). It is left out of the readings and kept in ``Snapshot.invalid`` (file, metric, entity,
value, why), so a report says "invalid" rather than "missing" (``VALID_RANGE``).

Which machine: GPU model names (``modelName`` / ``name`` columns) and host names (DCGM
``Hostname`` label) are kept per input file in ``Snapshot.machines``; served model names (the
``model_name`` label of vLLM/SGLang series) in ``Engine.model_names``.
"""
