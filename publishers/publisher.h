// SPDX-License-Identifier: Apache-2.0
// Where a tick's reports go. Each publisher takes what one sampling step
// produced (publishers/tick.h: every scope's report, built and serialized
// once) and writes it its own way: the report files, an Envoy bridge file,
// Prometheus, the out-of-band stream. The pipeline (agent/daemon/) publishes
// every tick through all of them, in the order of its publisher table.
// Nothing here knows the configuration file: each publisher is built from
// its own options, which the daemon's table derives from the Config.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/orca/result.h"
#include "publishers/tick.h"

namespace headroom::publishers {

class Publisher {
 public:
  virtual ~Publisher() = default;

  // Publishes one tick. A failure is logged by the publisher, once per change;
  // the error tells the pipeline (an essential publisher holds up READY=1 and
  // --once's exit status).
  virtual Result<void> publish(const Tick& tick) = 0;
  // Clean stop: writes the final state (`final` is marked stopped) or a
  // neutral value, whatever leaves readers right once nobody updates it.
  virtual void stop(const Tick& final) = 0;

  // A reload built this publisher to replace the running ones, which
  // published `previous_scopes`: it cleans up what only they had (e.g. the
  // reports of endpoints that are gone).
  virtual void take_over(const std::vector<std::string>& previous_scopes) { (void)previous_scopes; }
  // A reload no longer configures what this publisher writes (no publisher of
  // the new configuration has its target): leave it in a state nobody needs
  // to update.
  virtual void retire() {}
  // Logs where it publishes, once the configuration it belongs to is in force.
  virtual void announce() const {}

  virtual std::string_view name() const = 0;  // the table's name: "orca_dir", "envoy"
  // What it writes (a directory, a file): a reload keeps a target and
  // retires the others.
  virtual const std::string& target() const = 0;
  // Whether its failure means the tick was not published (node.orca's).
  virtual bool essential() const { return false; }
};

// A publisher that cannot be built says why in an Error: with an errno
// (`code`) when the place it writes to is unusable (headroomd exits 73),
// without one when the configuration is wrong (exit 78).
using Publishers = std::vector<std::unique_ptr<Publisher>>;

}  // namespace headroom::publishers
