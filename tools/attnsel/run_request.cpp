#include "run_request.hpp"

namespace attnsel::cli {

void RunRequest::add_to(CLI::App& app) {
  platform.add_to(app);
  backend.add_to(app);
  model.add_to(app, true);
  output.add_to(app);
  app.add_option("--batch", steps.batch, "sequences in the batch")->capture_default_str()->transform(PositiveInteger);
  app.add_option("--context", steps.context, "prompt tokens per sequence (prefilled)")
      ->capture_default_str()
      ->transform(NonNegativeInteger);
  app.add_option("--new-tokens", steps.new_tokens, "query tokens per sequence in each decode step")
      ->capture_default_str()
      ->transform(PositiveInteger);
  app.add_option("--decode-steps", steps.decode_steps, "decode steps after the prefill")
      ->capture_default_str()
      ->transform(NonNegativeInteger);
  app.add_flag("--check,!--no-check", steps.check,
               "compare a sample of the outputs with the double-precision reference (default: on)");
  app.add_flag("--ceilings,!--no-ceilings", ceilings,
               "measure the read bandwidth and compute peaks first, to report fractions (default: on)");
  app.add_flag("!--no-progress", progress, "no progress bar");
  app.add_flag("--cuda-graphs", cuda_graphs,
               "capture the decode step (every layer) in a CUDA graph once and replay it (kernels with graph support)");
  app.add_flag("--sync-steps", sync_steps,
               "wait for each decode step before preparing the next (default: the next step's plan update and "
               "launches overlap the running step, as with an engine's asynchronous scheduling)");
}

}  // namespace attnsel::cli
