// A plan in HDF5 (kiln plan --out): what the run will instantiate from, and
// what diagnostics show.
//
//   attributes      format "kiln-plan", format_version (3), nodes, f, global_microbatches,
//                   min_nodes, max_nodes, memory_per_rank_bytes
//   /templates      per node count: nodes, stages, ranks_per_node, stage_width, reference_microbatches,
//                   bottleneck_s, fill_drain_s, sync_s (nodes 0: none fits); then the templates of other
//                   widths that the instantiation pins (plan.pipelines = '2w4+...')
//   /stages         per stage of every template: template_nodes, template_width, stage (on stage_width ranks of node
//                   stage / (g / stage_width)), first_layer, end_layer, time_s, sync_s, memory_bytes
//                   (per rank), param_bytes (per rank), activation_bytes (per rank and microbatch in flight)
//   /instantiation  per pipeline: nodes, stage_width (0: the template's best), microbatches, step_time_s;
//                   attributes nodes_used, nodes_idle, step_time_s
#pragma once

#include "kiln/plan/instantiation.hpp"

#include <string>

namespace kiln::plan {

void writePlan(const std::string& path, const TemplateSet& templates, const Instantiation& instantiation,
               std::uint32_t nodes, std::uint32_t f, std::uint64_t globalMicrobatches);

// Reads what writePlan wrote (templates with their stages, the instantiation).
void readPlan(const std::string& path, TemplateSet& templates, Instantiation& instantiation);

}  // namespace kiln::plan
