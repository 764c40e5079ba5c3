#include "kiln/config/deck_schema.hpp"
#include "kiln/config/model_presets.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <regex>
#include <sstream>

namespace kiln::config {

const std::vector<KeySpec>& deckSchema() {
    static const std::vector<KeySpec> schema = {
        // [run]
        {"run.name", KeyType::Text, "kiln", "Name of the run; outputs go to <run.out_dir>/<run.name>/.", identifier()},
        {"run.out_dir", KeyType::Text, "runs", "Directory that holds the runs' outputs (resolved deck, diagnostics, checkpoints).", {}},
        {"run.steps", KeyType::Integer, "100", "Number of optimizer steps (global batches) to train.", atLeast(0)},
        {"run.seed", KeyType::Integer, "1234", "Seed of everything random: weights, data order. Same deck + same seed = same run.", atLeast(0)},
        {"run.tensorboard", KeyType::Flag, "true",
         "Write TensorBoard event files as the run goes (issue 67): every step's loss, learning rate, gradient norm, "
         "tokens/s and times, the data mix, the experts' balance, evaluations, and kiln's own timeline (layouts, "
         "tolerance, failures, checkpoints, every diag.h5 event as text). One rank writes them, as diag.h5, with no "
         "collective; flushed after every step. `tensorboard --logdir <run.out_dir>` shows every run. kiln diag "
         "--tensorboard writes the same from a diag.h5.",
         {}},
        {"run.tensorboard_dir", KeyType::Text, "",
         "Directory of the event files; empty = <run.out_dir>/<run.name>/tensorboard. A resumed or requeued run "
         "continues it, its redone steps replacing the earlier ones.",
         {}},

        // [cluster]
        {"cluster.ranks_per_node", KeyType::Integer, "0",
         "Ranks per node, the failure unit. 0 groups ranks by host name (what a real cluster wants); "
         "a positive value groups consecutive ranks, to emulate several nodes on one machine.",
         atLeast(0)},
        {"cluster.waits", KeyType::Text, "auto",
         "How a rank waits for its peers (pipeline transfers, the step's agreements and sums over MPI, and MPI's own "
         "blocking calls: the step's all-gather, shrinks). spin: polls without pause, the least latency where every "
         "rank has a core of its own; sleep: a wait past 200 us naps a tenth of what it has waited so far (at most "
         "1 ms) and leaves its core to the ranks that compute, for ranks that share cores (kiln asks Open MPI to "
         "yield when idle, mpi_yield_when_idle, and takes its yields for naps); auto: sleep where a host's ranks "
         "outnumber its cores, spin otherwise. Hosts emulated on one machine (namespaces) want sleep: each counts the "
         "machine's cores as its own.",
         oneOf({"auto", "spin", "sleep"})},
        {"cluster.spare_nodes", KeyType::Integer, "0",
         "Nodes held in reserve: they hold no stage and take no microbatches until a node fails, when one takes the "
         "failed node's place (it receives that node's layers from surviving replicas) and the layout, speed and fault "
         "tolerance stay what they were. Only when the spares are used up do the survivors regroup into smaller "
         "pipelines. Ask the scheduler for the pipelines' nodes plus these. A job with too few nodes for fault.f + 1 "
         "pipelines gives up spares first.",
         atLeast(0)},

        // [fault]
        {"fault.f", KeyType::Integer, "0",
         "Fault tolerance: the number of simultaneous node failures the run survives without restarting. kiln runs "
         "at least f+1 replicas, and again after every failure whenever the surviving nodes can form them, so a run "
         "outlives any number of failures spread over time while nodes remain; it needs at least f+1 nodes, and f > 0 "
         "needs ULFM (mpirun --with-ft ulfm). When the survivors cannot form f+1 replicas the tolerance drops (said "
         "once); a failure that leaves some layer with no holder, or too few nodes for one replica, makes kiln write "
         "what it can and stop (exit 75) for a requeue.",
         atLeast(0)},
        {"fault.inject", KeyType::Text, "",
         "Fault injection for tests and demos: RANK:STEP:PHASE items (phase: forward, backward, send (the first "
         "activation or gradient sent to a neighbouring stage), allreduce (after the rank's backwards, before it "
         "waits for its sums), sums (in the middle of the gradient sums), commit, optimizer (after the commit), "
         "checkpoint (before a checkpoint write), write (in a writer's thread, after the first layer of its part; "
         "STEP is the step the checkpoint follows), publish (on the writing rank, the file complete, before "
         "`latest` moves), the phases of a recovery in order: agree (a round's start), regroup (after the shrink), "
         "migrate (before the layers move), received (after this rank's first migrated atom arrived), migrated "
         "(before the new layout is committed), rebuild (after it, before its communicators); eval (in the held-out evaluation after STEP); ready (STEP 0: on a process started to join the running job, "
         "RANK the start-up rank it is to have, before it says it is ready); rollback (a numerics.rollback's return to the checkpoint, STEP the step whose comparison found the copy, before the loads)); that start-up rank kills itself with SIGKILL there, or with ':stop' "
         "stops itself (SIGSTOP, a hung process), or with ':slow' computes for 10 s without MPI (a long step, which "
         "must not pass for a hang), or with ':throw' throws an exception from outside kiln (a local error: "
         "that process ends alone), or with ':hang' sleeps forever outside MPI while its other threads live "
         "(found by fault.step_timeout_s). RANK:STEP[-END]:slow=LAG makes that rank a straggler from STEP on (to END): "
         "LAG seconds of sleep after every microbatch's forward (slow=0.05), or a factor of its compute (slow=2x: "
         "twice as slow). Numeric faults (the process lives, its numbers are wrong; numerics.check finds them): "
         "RANK:STEP:nan (a NaN in that rank's loss, once: a last stage's), RANK:STEP:corrupt (its first activation or "
         "gradient sent in the step with the exponent's top bit flipped, once), RANK:STEP:poison (a NaN in its loss at "
         "every attempt of the step: a bad batch), RANK:STEP:flip (the exponent's top bit of a value of its parameters "
         "flipped as the step starts: memory, until repaired), RANK:STEP:drift (the exponent's second bit of that value flipped: a weight below 2 in magnitude becomes nearly 0, which no step check sees; the replicas' comparison finds it). E.g. '3:5:allreduce', '2:7:forward:stop', '2:3:slow=2x', "
         "'5:12:nan'. Ignored in a requeued Slurm job (SLURM_RESTART_COUNT > 0).",
         [](const Value& v) -> std::string {
             static const std::regex item(R"(\d+:\d+:(forward|backward|send|allreduce|sums|commit|optimizer|checkpoint|write|publish|regroup|migrate|agree|received|migrated|rebuild|eval|ready|rollback)(:stop|:slow|:throw|:hang)?)");
             static const std::regex lag(R"(\d+:\d+(-\d+)?:slow=(\d+(\.\d*)?|\.\d+)(s|x)?)");
             static const std::regex numeric(R"(\d+:\d+:(nan|corrupt|poison|flip|drift))");
             std::string text = std::get<std::string>(v);
             for (auto& c : text)
                 if (c == ',') c = ' ';
             std::istringstream in(text);
             for (std::string word; in >> word;)
                 if (!std::regex_match(word, item) && !std::regex_match(word, lag) && !std::regex_match(word, numeric))
                     return "'" + word + "' is not RANK:STEP:PHASE[:stop|:slow|:throw|:hang] with phase forward, backward, send, allreduce, "
                                         "sums, commit, optimizer, checkpoint, write, publish, agree, regroup, migrate, received, "
                                         "migrated, rebuild, eval, ready or rollback, nor "
                                         "RANK:STEP[-END]:slow=SECONDS or slow=FACTORx, nor RANK:STEP:nan|corrupt|poison|flip|drift";
             return "";
         }},

        {"fault.min_f", KeyType::Integer, "0",
         "The least fault tolerance a run accepts. A job with too few nodes for fault.f (a requeued job that got "
         "fewer nodes) runs with the largest f its nodes allow (nodes - 1), down to this, and says so in the log, the "
         "resolved deck and diag.h5 (event 'fault_f'); below it the run is refused. Set it to fault.f to never run "
         "with less.",
         atLeast(0)},
        {"fault.replan_margin", KeyType::Real, "0.02",
         "After a failure (or an admission) the pipelines that lost no node keep their nodes, ranks and layers, and "
         "only the nodes of the pipelines that lost some, with idle nodes and spares, form pipelines anew: a failure "
         "moves about the failed node's layers, not the job's. The whole layout is planned again instead when the kept "
         "one's predicted step is more than this fraction slower than a new plan's for the live nodes, or when a new "
         "plan tolerates more failures (up to fault.f); each such re-plan is logged with both step times. 0.02: two "
         "per cent.",
         realInRange(0.0, 10.0)},
        {"fault.step_deadline", KeyType::Real, "3",
         "Hangs are found from the step's own clock: inside a step, a rank's training thread that gives no sign of "
         "life (it gives one at every wait and every step) for this many times the median of the last steps, at "
         "least fault.step_deadline_floor_s, is hung outside MPI (a file read, a device call) and its process ends "
         "itself; a process of the job stopped that long (SIGSTOP, state T) is ended by another process of the job on "
         "its host. The job then recovers at once, as from a dead process, instead of waiting fault.hang_timeout_s. "
         "Waiting for a slow peer never counts. The first steps of a start and after a layout change, and the work "
         "between steps (checkpoints, evaluations, admissions, recoveries), are under the looser "
         "fault.step_timeout_s rule. Needs fault.hang_timeout_s > 0.",
         realInRange(1.0, 1e6)},
        {"fault.step_deadline_floor_s", KeyType::Real, "10",
         "The least step deadline (fault.step_deadline), in seconds: short steps do not make a slow file read a hang.",
         realInRange(0.1, 86400.0)},
        {"fault.step_timeout_s", KeyType::Real, "0",
         "Seconds a rank's training thread may stay away from the step loop between steps (checkpoint copies, "
         "evaluations, admissions, recoveries) and in the first steps of a start or after a layout change, before its "
         "process ends itself (a hung file read, a device call that never returns) so that the others recover. 0 = "
         "automatic: 10 times the slowest step so far, at least 300 s. A value > 0 also replaces the step deadline "
         "(fault.step_deadline) inside steps. Checkpoint writes are exempt (a background one too, while it lasts). Needs fault.hang_timeout_s > 0.",
         realInRange(0.0, 86400.0)},
        {"fault.nccl_timeout_s", KeyType::Real, "120",
         "Seconds a GPU transfer or NCCL communicator creation may take before its peer counts as failed (NCCL "
         "cannot be revoked: every NCCL wait polls with this deadline). Raise it for very large buckets on slow "
         "links.",
         realInRange(1.0, 86400.0)},
        {"fault.finalize_timeout_s", KeyType::Real, "20",
         "Seconds a process may take to end once training is over (closing its files and communicators, "
         "MPI_Finalize) before it exits without finishing, with the status it earned: Open MPI's shutdown can wait "
         "forever for a failed peer (about 1 run in 20 to 100 here), and a job must end on its own, after failures "
         "or not (a failure-free stop once hung there). Raise it for very large jobs, whose shutdown takes longer.",
         realInRange(5.0, 3600.0)},
        {"fault.hang_timeout_s", KeyType::Real, "60",
         "Seconds of silence after which a rank counts as failed, for hangs (a stopped process, a hung device), "
         "which only heartbeats reveal: Open MPI's heartbeat detector (a heartbeat every second, or every quarter "
         "of it if shorter), kept alive by a kiln thread while a rank computes. Keep it above the job's start-up "
         "skew, and at 30 s or more on a job across hosts: heartbeats travel with the data, and a link that loses "
         "packets holds them up (measured: 50 ms and 5 % loss on one link made the detector declare healthy ranks "
         "failed at 15 s, not at 30 s; kiln warns below 30 s). 0 = off: only processes that die are detected, and a hung rank blocks the others forever. A rank "
         "declared failed is killed (SIGKILL) by a survivor on its host, so that the job ends on its own. Works under mpirun --with-ft ulfm.",
         realInRange(0.0, 3600.0)},

        // [straggler]
        {"straggler.rebalance_at", KeyType::Real, "1.25",
         "Rebalance when a pipeline computes this many times slower than the share of the batch it was given assumes "
         "(or as many times faster: a slow node that recovered) in each of the last straggler.steps committed steps "
         "(timing noise only adds time, so one long step changes nothing), measured against the median rank (so a "
         "profile that is off for every rank changes nothing). The batch is split again over the same pipelines by "
         "their measured speeds (medians over those steps), at a step boundary; the maths of the step, "
         "and so the losses, stay the same. 0 = never.",
         realInRange(0.0, 1e6)},
        {"straggler.steps", KeyType::Integer, "5", "Steps in each of which a pipeline must be off its share before the batch is split again (by the medians "
         "over them).",
         atLeast(1)},
        {"straggler.retire_at", KeyType::Real, "3",
         "Retire a node whose slowest stage takes this many times its pipeline's planned bottleneck stage (times "
         "scaled by the median rank's, so a profile off for every rank changes nothing) over straggler.retire_steps "
         "steps (their median): it is retired as a failed node would be (its layers held elsewhere, the survivors "
         "regrouped from the templates, a spare taking its place if there is one; its processes stay in the job without "
         "work), recorded as a 'straggler' event. Only when "
         "the nodes left still tolerate fault.f failures and the plan predicts a shorter step without it; else it "
         "stays, with a smaller share. 0 = never.",
         realInRange(0.0, 1e6)},
        {"straggler.retire_steps", KeyType::Integer, "10", "Steps over which a node must be beyond straggler.retire_at (its median) before it is retired.",
         atLeast(1)},
        {"straggler.return_at", KeyType::Real, "1.5",
         "A retired straggler's processes stay in the job without work and time one block of the model every step; "
         "the node comes back (as a spare, or into the pipelines when the job runs on fewer nodes than it started "
         "with) once every one of its ranks ran it at most this many times the plan's time (scaled by the median "
         "working rank's, as for retirement) over straggler.retire_steps steps (their median). Below "
         "straggler.retire_at (left at its default, at most halfway from 1 to it); 0 = never.",
         realInRange(0.0, 1e6)},

        // [numerics]
        {"numerics.check", KeyType::Flag, "true",
         "Check every step's loss and gradient norm before the optimizer applies them (issue 66): a value that is not "
         "finite, or a spike (numerics.loss_spike, numerics.grad_spike), is never applied. The step is run again from "
         "the same state: if the rerun disagrees, a transient fault on some rank (its node is named and retired as a "
         "failed node would be, cause 'corruption'); if it agrees, the data or the model (numerics.on_repeat). No "
         "collective is added: the figures ride on the step's one.",
         {}},
        {"numerics.loss_spike", KeyType::Real, "4",
         "A loss (per target token) above this many times the largest of the last numerics.window committed steps' "
         "is a spike. The tests' 198 runs (2 415 steps, perf/RESULTS.md) reach 1.19x after 20 steps of history. "
         "0 = never.",
         realInRange(0.0, 1e12)},
        {"numerics.grad_spike", KeyType::Real, "50",
         "A gradient norm (before clipping) above this many times the largest of the last numerics.window committed "
         "steps' is a spike. The tests' runs reach 3.1x after 20 steps of history (56x after 13: hence "
         "numerics.min_history). A flipped exponent bit gives 1e30 and more. 0 = never.",
         realInRange(0.0, 1e12)},
        {"numerics.compare_every", KeyType::Integer, "100",
         "Every this many steps, and before every checkpoint, every holder of a layer's shard fingerprints its "
         "parameters and AdamW moments (their 32-bit words summed as integers) and the holders compare: copies are "
         "bitwise equal by construction. Three or more holders: the outvoted one's node is retired (cause "
         "'corruption'), its layers coming from the others. Two that differ: no majority, so the job stops for a "
         "requeue (exit 75) from the last checkpoint, which was compared before it was written. A flagged step whose "
         "rerun repeats it is compared at once. 0 = only then and before checkpoints; the cost is in "
         "perf/RESULTS.md.",
         atLeast(0)},
        {"numerics.rollback", KeyType::Flag, "true",
         "When a comparison outvotes a copy that steps since the last comparison that agreed may have used (its "
         "gradients went into every holder's sum): every survivor returns to the last checkpoint, which was compared "
         "before it was written, and trains those steps again, so the run's losses and weights are the failure-free "
         "run's. false: the repaired copies go on with those steps kept. Without a checkpoint to return to, they are "
         "kept and the log says so.",
         {}},
        {"numerics.activation_limit", KeyType::Real, "1e12",
         "The largest magnitude an activation or gradient a stage sends to its neighbour may have: beyond it (or not "
         "finite) the step is flagged like a spike. A norm layer can hide a flipped exponent bit from the loss (an "
         "RMSNorm of a token holding 3e37 gives zeros: the loss moves by 0.05 %), not from this; a healthy model's "
         "outliers are around 1e3-1e4. 0 = never.",
         realInRange(0.0, 1e300)},
        {"numerics.window", KeyType::Integer, "100", "Committed steps whose loss and gradient norm the spike tests remember.",
         atLeast(1)},
        {"numerics.min_history", KeyType::Integer, "20",
         "Committed steps of history (since the start, or kept in the checkpoint resumed from) before spikes are judged; "
         "values that are not finite are judged from the first step.",
         atLeast(1)},
        {"numerics.on_repeat", KeyType::Text, "skip",
         "What a flagged step whose rerun gives the same numbers does (the batch or the model, not a rank): skip "
         "(its batch is consumed without an update, recorded in diag.h5 as a 'numerics' event; the same batch is skipped "
         "again after a restart, the history being in the checkpoint) or stop (a checkpoint of the state before the "
         "step, exit 3: a requeue would meet it again).",
         oneOf({"skip", "stop"})},
        // [plan]
        {"plan.nodes", KeyType::Integer, "0", "Nodes that kiln plan plans for; 0 = the nodes of the job. kiln run always "
         "plans for the nodes it is given.", atLeast(0)},
        {"plan.pipelines", KeyType::Text, "",
         "Pin the layout instead of the planner's choice: the node count of each pipeline, '+'-separated, largest "
         "first or not (e.g. '2+1': a 2-node and a 1-node pipeline), optionally with each pipeline's stage width "
         "('2w4+1w2': stages of 4 and of 2 ranks; without it the template's best width) and its microbatches "
         "('2:5+1:3', '2w4:5+1w2:3'; they must add up to the global batch's). Checked against the templates, the "
         "nodes and fault.f + 1 like the planner's own choice. Empty: the planner chooses.",
         [](const Value& v) -> std::string {
             static const std::regex layout(R"(\s*\d+(w\d+)?(:\d+)?(\s*\+\s*\d+(w\d+)?(:\d+)?)*\s*)");
             const auto& text = std::get<std::string>(v);
             if (text.empty()) return "";
             if (!std::regex_match(text, layout))
                 return "expected NODES+NODES+... (e.g. '2+1'), with optional stage widths (e.g. '2w4+1w2') and "
                        "microbatches (e.g. '2:5+1:3' or '2w4:5+1w2:3')";
             const bool anyShare = text.find(':') != std::string::npos;
             std::size_t pipelines = 1;
             for (char c : text) pipelines += c == '+';
             if (anyShare && std::count(text.begin(), text.end(), ':') != static_cast<long>(pipelines))
                 return "give microbatches for every pipeline or for none";
             static const std::regex zero(R"((^|[+:w\s])0+(\D|$))");
             if (std::regex_search(text, zero)) return "node counts, widths and microbatch counts must be at least 1";
             return "";
         }},
        {"plan.stage_width", KeyType::Integer, "0",
         "Ranks of one node that each pipeline stage spans (tensor parallelism: the stage's layers are split among "
         "them, Megatron-LM style). Must divide cluster.ranks_per_node. 0: the planner chooses, per pipeline "
         "template, the width with the shortest step that fits in memory.",
         atLeast(0)},
        {"plan.memory_gb", KeyType::Real, "80", "Memory per rank (GB) that a stage may use.", realInRange(0.001, 1e6)},
        {"plan.intra_node_gb_s", KeyType::Real, "200",
         "Bandwidth between ranks of one node in GB/s (1e9 bytes per second): activations between the consecutive "
         "stages a node's ranks hold.",
         realInRange(1e-6, 1e6)},
        {"plan.inter_node_gb_s", KeyType::Real, "25",
         "Bandwidth between nodes in GB/s (1e9 bytes per second): activations from a node's last stage to the next "
         "node, and gradient sums across pipelines.",
         realInRange(1e-6, 1e6)},
        {"plan.profile", KeyType::Text, "",
         "A layer profile from kiln profile. Empty: measured at start-up, or synthetic at plan.device_tflops.", {}},
        {"plan.device_tflops", KeyType::Real, "0",
         "With no plan.profile: the sustained speed of one rank, TFLOP/s, for a synthetic profile from the model's "
         "FLOPs (backward counted as 2x forward), to plan for a machine ahead of time. 0 = measure the device the "
         "run computes on: kiln run times the embedding, one block and the head on every rank at start-up (the "
         "median over the ranks, kept in RUN_DIR/startup-profile.h5 for the processes admitted later), kiln plan on "
         "this machine.",
         realInRange(0.0, 1e6)},

        // [data]
        {"data.dir", KeyType::Text, "data", "Directory holding one prepared source per sub-directory (see kiln prep).", {}},
        {"data.mix", KeyType::Mix, "demo:1",
         "Sources and their mix weights, as SOURCE:WEIGHT ... (e.g. 'wiki:0.7 books:0.3'). Weights are relative: "
         "they need not sum to 1. Each global batch meets them to within one sequence per source.",
         validMix()},
        {"data.eval_mix", KeyType::Mix, "",
         "Held-out validation sources and their weights, as data.mix (e.g. 'wiki_val:1'): prepared like the "
         "training sources, never trained on (a source of data.mix is refused here). Empty: no evaluation. The "
         "same tokens are evaluated every time, whatever the rank count or layout (train.eval_every, "
         "train.eval_batches).",
         validMixOrEmpty()},
        {"data.seq_len", KeyType::Integer, "256", "Tokens per training sequence (each sample holds seq_len+1 tokens).", atLeast(1)},
        {"data.global_batch", KeyType::Integer, "32", "Sequences per global batch (per optimizer step), whatever the number of ranks.", atLeast(1)},
        {"data.tokenizer", KeyType::Text, "",
         "The tokenizer every source must have been prepared with: 'bytes' or a SentencePiece .model. Empty: the "
         "sources must agree among themselves.",
         {}},
        {"data.shuffle_block", KeyType::Integer, "64",
         "Documents per shuffle block. Blocks are visited in a keyed random order, a new one each epoch.", atLeast(1)},
        {"data.shuffle_window", KeyType::Integer, "64",
         "Blocks whose documents are interleaved together. Larger: better shuffling; smaller: more read locality. "
         "Memory does not depend on it.",
         atLeast(1)},
        // [model]
        {"model.vocab", KeyType::Integer, "0",
         "Vocabulary size. 0: the tokenizer of the data decides (what training needs); set it to plan or profile a "
         "model without its data. In training it may exceed the tokenizer's (padding, e.g. 50304 for GPT-2's 50257 ids: "
         "matrix products on multiples of 64 are faster), never fall below it.",
         atLeast(0)},
        {"model.blocks", KeyType::Integer, "2", "Transformer blocks. The model's layers are: embedding, the blocks, output.", atLeast(1)},
        {"model.d_model", KeyType::Integer, "64", "Width of the residual stream.", atLeast(8)},
        {"model.heads", KeyType::Integer, "4", "Attention heads; must divide model.d_model.", atLeast(1)},
        {"model.mlp_ratio", KeyType::Integer, "4", "gpt2: hidden width of the MLP as a multiple of model.d_model.", atLeast(1)},
        {"model.preset", KeyType::Text, "",
         "A published shape by name: gpt2-small, gpt2-medium, smollm-135m, smollm2-135m, smollm2-1.7b, llama-3.2-1b, "
         "llama-3.2-3b, llama-3.1-8b, llama-3.1-70b, mistral-7b-v0.3, qwen2.5-0.5b, qwen2.5-7b, qwen3-0.6b, qwen3-8b, "
         "llama-3-8b, llama-2-70b, and mixtures of experts: mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b, "
         "qwen3-235b-a22b, olmoe-1b-7b. It "
         "fills the model.* keys the deck leaves at their defaults (model.vocab included); a key the deck sets wins. "
         "kiln deck --check prints the resolved shape and its parameter count.",
         [](const Value& v) {
             const auto& name = std::get<std::string>(v);
             if (name.empty() || findModelPreset(name)) return std::string();
             std::vector<std::string> names;
             for (const auto& preset : modelPresets()) names.push_back(preset.name);
             return fmt::format("no such preset; kiln knows: {}", fmt::join(names, ", "));
         }},
        {"model.init_from", KeyType::Text, "",
         "A Hugging Face model directory (config.json and model.safetensors, sharded or not; LlamaForCausalLM or "
         "GPT2LMHeadModel) whose weights a fresh run starts from, each rank reading its own layers; the optimizer "
         "starts fresh at step 0. The deck's model must be that one (kiln import DIR prints its [model] section). "
         "Ignored when the run resumes from a checkpoint.",
         {}},
        {"model.family", KeyType::Text, "gpt2",
         "Architecture. gpt2: learned positions, LayerNorm with biases, GELU MLP, multi-head attention. llama (Llama "
         "2/3, Mistral, Qwen, SmolLM): RMSNorm, rotary position embeddings, SwiGLU MLP, grouped-query attention, no "
         "biases unless model.qkv_bias (Qwen 2), q/k norms with model.qk_norm (Qwen 3).",
         oneOf({"gpt2", "llama"})},
        {"model.kv_heads", KeyType::Integer, "0",
         "llama: key/value heads (grouped-query attention); must divide model.heads. 0 = model.heads, 1 = multi-query. "
         "A tensor-parallel stage's width must divide it (each rank holds whole key/value heads).",
         atLeast(0)},
        {"model.ffn_hidden", KeyType::Integer, "0",
         "llama: width of the SwiGLU MLP. 0 = the Llama rule, 8/3 of model.d_model rounded up to a multiple of 256.",
         atLeast(0)},
        {"model.norm_eps", KeyType::Real, "1e-5", "llama: RMSNorm's epsilon.", realInRange(0.0, 1.0)},
        {"model.rope_theta", KeyType::Real, "10000", "llama: base of the rotary position embeddings (Llama 3: 500000).",
         realInRange(1.0, 1e12)},
        {"model.head_dim", KeyType::Integer, "0",
         "llama: a head's width, when it is not model.d_model / model.heads (Qwen 3: 128 at every size). 0 = "
         "model.d_model / model.heads.",
         atLeast(0)},
        {"model.qkv_bias", KeyType::Flag, "false",
         "llama: biases on the q, k and v projections, as Qwen 2 and 2.5 have them (no other bias).", {}},
        {"model.qk_norm", KeyType::Flag, "false",
         "llama: RMSNorm (model.norm_eps) of each query and key head before the rotation, one weight of head_dim "
         "for all query heads and one for all key heads, as Qwen 3 has it.",
         {}},
        {"model.qk_norm_over", KeyType::Text, "head",
         "llama with model.qk_norm: what one norm spans. head: each head, one weight of head_dim for every head "
         "(Qwen 3); projection: the whole q and k projections, weights of heads x head_dim and kv_heads x head_dim "
         "(OLMoE).",
         oneOf({"head", "projection"})},
        {"model.experts", KeyType::Integer, "0",
         "llama: a mixture of experts in place of each block's dense MLP: this many SwiGLU experts, of which each "
         "token goes to model.experts_per_token chosen by a router (dropless: no capacity limit). 0 = the dense MLP "
         "of model.ffn_hidden. A stage's experts are spread over its ranks: its width must divide this.",
         atLeast(0)},
        {"model.experts_per_token", KeyType::Integer, "0",
         "llama with model.experts: the experts each token is routed to (top-k; Mixtral: 2, Qwen3-30B-A3B and "
         "OLMoE: 8). Between 1 and model.experts.",
         atLeast(0)},
        {"model.expert_hidden", KeyType::Integer, "0",
         "llama with model.experts: each expert's SwiGLU width (moe_intermediate_size; Mixtral's intermediate_size).",
         atLeast(0)},
        {"model.shared_expert_hidden", KeyType::Integer, "0",
         "llama with model.experts: the width of a shared SwiGLU expert every token passes through beside its "
         "routed ones (DeepSeek's shared experts, unweighted). 0 = none.",
         atLeast(0)},
        {"model.router_softmax", KeyType::Text, "after_topk",
         "llama with model.experts: how a token's weights for its experts are taken from the router's scores. "
         "after_topk: a softmax over the chosen experts' scores, so they sum to 1 (Mixtral; Qwen 3 MoE with "
         "norm_topk_prob); before_topk: the softmax over all experts, kept for the chosen ones (OLMoE).",
         oneOf({"after_topk", "before_topk"})},
        {"model.router_aux_loss", KeyType::Real, "0.01",
         "llama with model.experts: the weight of the load-balancing loss added to the training loss, "
         "E * sum_e f_e P_e per sequence and block (f_e: the share of the sequence's k x T choices that went to "
         "expert e; P_e: its mean router probability; 1 when balanced), averaged over the sequences and summed "
         "over the blocks. 0 = none.",
         realInRange(0.0, 1e3)},
        {"model.router_z_loss", KeyType::Real, "0",
         "llama with model.experts: the weight of the router z-loss (the squared log-sum-exp of a token's router "
         "scores, averaged over the tokens and summed over the blocks), which keeps the scores small. 0 = none.",
         realInRange(0.0, 1e3)},
        {"model.hf_architecture", KeyType::Text, "",
         "The transformers class kiln export writes: empty for the one the model implies (GPT2LMHeadModel; "
         "Qwen2ForCausalLM with model.qkv_bias, Qwen3ForCausalLM with model.qk_norm, MistralForCausalLM with a "
         "sliding window, else LlamaForCausalLM; with experts MixtralForCausalLM, Qwen3MoeForCausalLM or "
         "OlmoeForCausalLM); kiln import sets it to the checkpoint's own (a Mistral v0.3 is a Llama, and comes back "
         "as MistralForCausalLM by this key alone). The classes kiln knows are listed once, in "
         "src/arch/hf_families.cpp, and checked there.",
         {}},
        {"model.max_positions", KeyType::Integer, "0",
         "llama: the context the model declares (Hugging Face's max_position_embeddings: 131072 for Llama 3.1), which "
         "checkpoints keep and kiln export writes, whatever data.seq_len a run trains at (a continued pre-training at "
         "8192 of a 131072-position model stays a 131072-position model); a run at a longer data.seq_len extends it "
         "to that. 0 = data.seq_len. kiln import and the presets set it. GPT-2's positions are learned rows: its context is data.seq_len.",
         atLeast(0)},
        {"model.sliding_window", KeyType::Integer, "0",
         "llama: sliding-window attention, as Mistral v0.1 has it: each position sees itself and the window - 1 "
         "before it (transformers' sliding_window). 0 = every earlier position. Memory and time are those of full "
         "attention (the window is a mask).",
         atLeast(0)},
        {"model.rope_scaling", KeyType::Text, "none",
         "llama: how the rotary frequencies are scaled for a longer context, as transformers computes each: none; "
         "linear (every frequency divided by model.rope_factor); llama3 (Llama 3.1-3.3: low frequencies divided by "
         "the factor, high ones kept, those between blended); yarn (Qwen 2.5's long-context configs: a ramp over the "
         "dimensions, cosines and sines times an attention factor).",
         oneOf({"none", "linear", "llama3", "yarn"})},
        {"model.rope_factor", KeyType::Real, "1", "llama: the rotary scaling's factor (Llama 3.1: 8; Llama 3.2: 32).",
         realInRange(1.0, 1e6)},
        {"model.rope_low_freq_factor", KeyType::Real, "1", "llama3 scaling: wavelengths above original context / this are divided by the factor.",
         realInRange(1e-6, 1e6)},
        {"model.rope_high_freq_factor", KeyType::Real, "4", "llama3 scaling: wavelengths below original context / this are kept.",
         realInRange(1e-6, 1e6)},
        {"model.rope_original_context", KeyType::Integer, "0",
         "llama3 and yarn scaling: the context the model was first trained on (original_max_position_embeddings; "
         "Llama 3.1: 8192).",
         atLeast(0)},
        {"model.rope_beta_fast", KeyType::Real, "32", "yarn scaling: rotations where the ramp starts (beta_fast).", realInRange(1e-6, 1e6)},
        {"model.rope_beta_slow", KeyType::Real, "1", "yarn scaling: rotations where the ramp ends (beta_slow).", realInRange(1e-6, 1e6)},
        {"model.rope_attention_factor", KeyType::Real, "0",
         "yarn scaling: what the cosines and sines are multiplied by; 0 = 0.1 ln(factor) + 1.", realInRange(0.0, 1e6)},
        {"model.tie_embeddings", KeyType::Flag, "false",
         "The output head is the token embedding (one V x d_model matrix, as GPT-2, SmolLM and Llama 3.2 1B have "
         "it). The last pipeline stage keeps a copy of it that the gradient sums keep equal: the same memory and "
         "communication as untied, V x d_model fewer parameters to train.",
         {}},

        // [train]
        {"train.micro_batch", KeyType::Integer, "4",
         "Samples per microbatch (per forward/backward). Gradients accumulate over the microbatches of a global batch; "
         "the loss is the mean over all its tokens, so the choice does not change the maths.",
         atLeast(1)},
        {"train.lr", KeyType::Real, "0.003", "Peak learning rate (after warm-up).", realInRange(0.0, 10.0)},
        {"train.min_lr", KeyType::Real, "0.0003", "Learning rate at the end of the cosine decay.", realInRange(0.0, 10.0)},
        {"train.warmup_steps", KeyType::Integer, "10", "Linear warm-up steps from 0 to train.lr.", atLeast(0)},
        {"train.decay_steps", KeyType::Integer, "0",
         "Steps of the cosine decay after warm-up. 0 = until run.steps of the run's first start; the horizon is kept "
         "in checkpoints, so raising run.steps on a resume adds steps at train.min_lr rather than reshaping the "
         "schedule (set this key to change the horizon).",
         atLeast(0)},
        {"train.beta1", KeyType::Real, "0.9", "AdamW beta1.", realInRange(0.0, 0.999999)},
        {"train.beta2", KeyType::Real, "0.95", "AdamW beta2.", realInRange(0.0, 0.999999)},
        {"train.eps", KeyType::Real, "1e-8", "AdamW epsilon.", realInRange(0.0, 1.0)},
        {"train.weight_decay", KeyType::Real, "0.1", "AdamW decoupled weight decay (not applied to norms and biases).",
         realInRange(0.0, 1.0)},
        {"train.grad_clip", KeyType::Real, "1.0", "Clip gradients to this global L2 norm; 0 = no clipping.", realInRange(0.0, 1e9)},
        {"train.device", KeyType::Text, "cpu",
         "Where to train: cpu, cuda (the rank's GPU; fails when libtorch sees none) or auto (cuda when there is one).",
         oneOf({"cpu", "cuda", "auto"})},
        {"train.precision", KeyType::Text, "fp32",
         "fp32, or bf16: matmuls in bfloat16 under libtorch's autocast, weights, gradients and AdamW moments in fp32.",
         oneOf({"fp32", "bf16"})},
        {"train.threads", KeyType::Integer, "0",
         "CPU cores per rank. With OpenBLAS they go to its pool (matrix products) and libtorch's own pool keeps 1 "
         "thread, since both pools busy-waiting on the same cores ran 2-3x slower. 0 = the CPUs the launcher bound the "
         "rank to, or else the host's CPUs divided by the ranks on the host.",
         atLeast(0)},
        {"train.grad_sums", KeyType::Text, "auto",
         "When a stage starts summing its gradients with the other replicas: during_backward (bucket by bucket as "
         "the last microbatch's backward finishes each layer), after_backward (once the stage's last send is out), "
         "or auto: during_backward where the sums run beside the compute (NCCL on its own stream), after_backward "
         "where a sum blocks the cores that compute (MPI). Either way the sums are the same.",
         oneOf({"auto", "during_backward", "after_backward"})},
        {"train.recompute", KeyType::Text, "none",
         "Activation recomputation: none (every layer keeps what its backward needs), selective (attention's core "
         "is recomputed in backward: its heads x seq_len^2 scores and probabilities are never kept, at the cost of "
         "about one more attention forward), or full (each layer keeps only its input and runs its forward again "
         "in backward: about a third more compute, activations of seq_len x d_model per layer), or auto (full on "
         "the stages the planner finds would not fit in plan.memory_gb without it, none elsewhere; `kiln plan` "
         "marks them). The planner's memory and time model counts it.",
         oneOf({"none", "selective", "full", "auto"})},
        {"train.peak_tflops", KeyType::Text, "auto",
         "Each device's dense peak in TFLOP/s, what MFU (model FLOPs utilization) and the hardware FLOPs utilization "
         "are measured against (the step line, diag.h5, TensorBoard): auto = from the GPU's name (H100, H200, B200, "
         "A100, MI300X and other common parts: docs/running.md lists them), at bf16 or TF32 as train.precision says; on a "
         "CPU, or a device not in the table, give a number, or no MFU is reported. The job's peak is this times its "
         "live ranks, spares and idle nodes included.",
         [](const Value& v) -> std::string {
             const auto& s = std::get<std::string>(v);
             if (s == "auto") return {};
             try {
                 std::size_t used = 0;
                 const double x = std::stod(s, &used);
                 if (used == s.size() && x > 0 && x < 1e6) return {};
             } catch (const std::exception&) {
             }
             return "must be auto or a peak in TFLOP/s > 0 (an H100 SXM: 989 at bf16)";
         }},
        {"train.eval_every", KeyType::Integer, "0",
         "Evaluate the held-out loss of data.eval_mix every this many steps and after the last step; 0 = only "
         "after the last step. An evaluation runs forward passes on the current pipelines and takes no training "
         "step; a failure during it is recovered and the evaluation redone.",
         atLeast(0)},
        {"train.eval_batches", KeyType::Integer, "4",
         "Global batches (data.global_batch sequences each) per evaluation: the first ones of data.eval_mix, the "
         "same every time.",
         atLeast(1)},
        {"train.log_every", KeyType::Integer, "1", "Print a progress line every this many steps.", atLeast(1)},

        // [checkpoint]
        {"checkpoint.every", KeyType::Integer, "0", "Write a checkpoint every this many steps (and at the end); 0 = only at the end.", atLeast(0)},
        {"checkpoint.parallel", KeyType::Flag, "true",
         "Every layer written by one of its holders into that rank's own part file, the bytes spread over all "
         "replicas, with a small index written last (format 2). false: one file, every layer sent to rank 0, which "
         "writes it alone (format 1). Both restore on any layout.",
         {}},
        {"checkpoint.background", KeyType::Flag, "true",
         "Periodic checkpoints (checkpoint.every): copied to host memory at the step boundary and written by a "
         "thread while training goes on; published once every rank's part is written. The last checkpoint of a "
         "run, a stop request's and the beyond-f one are always written at once. Needs checkpoint.parallel.",
         {}},
        {"checkpoint.keep", KeyType::Integer, "3", "Checkpoints kept; older ones are deleted once a newer one is complete.", atLeast(1)},
        {"checkpoint.from", KeyType::Text, "",
         "Resume from this checkpoint file instead of the one <run dir>/ckpt/latest names (e.g. an older one).", {}},
        {"checkpoint.resume", KeyType::Flag, "true",
         "Resume from <run dir>/ckpt/latest when it exists. New data.mix weights and more run.steps are fine; a "
         "different model or seq_len is refused with what differs.",
         {}},

        {"data.prefetch_steps", KeyType::Integer, "2", "Global batches the loader reads ahead in a background thread.",
         atLeast(1)},
        {"data.open_shards", KeyType::Integer, "0",
         "Shard files read by the chunk (shards whose shuffle blocks exceed 1 MiB) each rank keeps open per source, "
         "the least recently used closed "
         "first: open files stay bounded whatever the corpus. 0: a quarter more than data.shuffle_window (the shards "
         "one shuffle window spans, with room for blocks that straddle two shards); fewer reopen shards within a "
         "window. Each open file costs about 1 MB (HDF5's per-file cache and two chunks).",
         atLeast(0)},
        {"data.shard_memory_mb", KeyType::Integer, "0",
         "Shards of short documents, small or large, are read by the shuffle block (a block's documents, up to 1 "
         "MiB, or the part of them a small shard holds), their files closed, and held in memory up to this many MB "
         "per source and rank, the least recently used dropped first. 0: what one shuffle window holds of the "
         "source, a quarter more (from its mean document length; 8 to 256 MB; kiln data reports it).",
         atLeast(0)},
    };
    return schema;
}

const KeySpec* findKey(const std::string& name) {
    const auto& schema = deckSchema();
    const auto it = std::find_if(schema.begin(), schema.end(), [&](const KeySpec& k) { return k.name == name; });
    return it == schema.end() ? nullptr : &*it;
}

std::size_t editDistance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), 0);
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string nearestKey(const std::string& name) {
    std::string best;
    std::size_t bestDistance = std::string::npos;
    for (const auto& key : deckSchema()) {
        // Compare the whole name and the part after the section, so that a key
        // put in the wrong section ("[data] f = 1") still finds "fault.f".
        const std::string shortKey = key.name.substr(key.name.find('.') + 1);
        const std::string shortName = name.substr(name.find('.') + 1);
        const std::size_t d = std::min(editDistance(name, key.name), editDistance(shortName, shortKey) + 1);
        if (d < bestDistance) {
            bestDistance = d;
            best = key.name;
        }
    }
    // A suggestion further than a third of the name away is noise.
    return bestDistance <= std::max<std::size_t>(2, name.size() / 3) ? best : "";
}

}  // namespace kiln::config
