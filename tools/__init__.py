"""The maintainer's tools: what the scripts, the benchmarks and the tests share (the package
index and artifact cache, the line-by-line JSON writer, the repository's paths, the generated
fakes, the doctor scenarios, uv installs, the vLLM grid's data format). Nothing here imports a
test module; nothing here ships in the wheel."""
