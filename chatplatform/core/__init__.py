"""The pure core: token estimation and counters, context budgets, packing and rendering, the
prompt-cache model and the provider payloads and clients. Nothing here imports Django or any
of the apps, so it can be tested and benchmarked alone (checked by ``make lint``)."""
