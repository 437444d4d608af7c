// The main window's engine jobs: what each view needs, computed on the engine
// thread (analyses.hpp), converted to the view's plain struct on the GUI thread.
#include <QDoubleSpinBox>
#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>

#include <QCheckBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>

#include "analyses.hpp"
#include "analyses_sweep.hpp"
#include "embedlab/pipeline_request.hpp"
#include "fourier_map_view.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "neighbour_graph_view.hpp"
#include "rank_allocation_view.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"
#include "view_data.hpp"

namespace embedlab::app {

// What a running job says of itself (a Slurm array's state, a sweep's "3/16"), shown
// in the job list from the GUI thread; the id is known once the job is submitted.
StatusFn MainWindow::jobStatus(const std::shared_ptr<std::atomic<int>>& job_id)
{
    return [this, job_id](const std::string& what) {
        QMetaObject::invokeMethod(
            this,
            [this, job_id, what = QString::fromStdString(what)] { showJobStatus(job_id->load(), what); },
            Qt::QueuedConnection);
    };
}

int MainWindow::runCompression(const QString& method, int rank, double eps)
{
    CompressionRequest request = method_panel_->request(method);
    if (request.rank > 0) // the panel gives a rank to the methods that take one
        request.rank = rank;
    if (request.eps > 0)
        request.eps = eps;
    return runCompression(request, method_panel_->target());
}

int MainWindow::runCompression(const CompressionRequest& chosen, const RunTarget& target)
{
    if (model_path_.isEmpty()) {
        statusBar()->showMessage("Open a model first");
        return -1;
    }
    CompressionRequest request = chosen;
    request.model = model_path_.toStdString();
    if (const QString refused = encoderRequest(request); !refused.isEmpty()) {
        statusBar()->showMessage("Not run: " + refused);
        return -1;
    }
    try {
        check_request(request, model_dim_);
    } catch (const std::exception& e) {
        statusBar()->showMessage(QString("Not run: %1").arg(QString::fromUtf8(e.what())));
        return -1;
    }
    clearRefusal(); // an earlier refusal is not this run's
    auto job_id = std::make_shared<std::atomic<int>>(0);
    // A Slurm job's state ("Slurm 12: pending") replaces "running" in the job list.
    const StatusFn status = jobStatus(job_id);
    const int id = jobs_.submit(
        "compress " + QString::fromStdString(describe_run(request, target)) + scoredAs(request),
        [this, request, target, status,
         path = model_path_](const ProgressFn& progress) -> std::function<void()> {
            const auto r = compress_and_evaluate(request, target, progress, status);
            return [this, r, request, target, path] { addCompressionRow(r, request, target, path); };
        });
    job_id->store(id);
    return id;
}

QString MainWindow::encoderRequest(CompressionRequest& request) const
{
    // An encoder reads every position at once: it has no next-token perplexity. The engine's
    // run scores a masked-LM head by pseudo-perplexity (and masked-token KL), so the request
    // is copied and run elsewhere as it is; without such a head the rows carry the table's
    // reconstruction, and when asked the task's accuracy.
    if (!model_encoder_ || model_masked_lm_)
        return {};
    const QString name = QFileInfo(model_path_).fileName();
    if (request.divergence)
        return name +
               " is an encoder without a masked-LM head: it predicts no tokens, so + KL vs original does "
               "not apply. Untick it: its rows are scored by the cosine of the rebuilt table rows (the "
               "cosine column, y axis 1 \u2212 mean cosine), and the Compare tab compares its sentence "
               "embeddings before and after.";
    request.eval_text.clear(); // nothing to score it by ("Evaluate on" is disabled)
    request.eval_ids.clear();
    request.has_eval_ids = false;
    return {};
}

QString MainWindow::scoredAs(const CompressionRequest& request) const
{
    if (!model_encoder_)
        return request.divergence ? " + perplexity, KL vs original" : " + perplexity";
    if (!request.evaluates())
        return " + table cosine (an encoder: no perplexity)";
    return request.divergence ? " + pseudo-perplexity, masked-token KL" : " + pseudo-perplexity";
}

QString MainWindow::encoderNote(const QString& model, bool masked_lm)
{
    const QString name = QFileInfo(model).fileName();
    if (masked_lm)
        return name +
               " is an encoder with a masked-LM head: PPL is its pseudo-perplexity on the evaluation "
               "text (each token masked in turn, as embedlab-cli eval scores it) and \u0394 ln PPL "
               "against the original's, as the engine's run records it (embedlab-cli compress --eval-text). "
               "\u2013: not measured (no evaluation text).";
    return name + " is an encoder without a masked-LM head: it has no perplexity (\u2013). Its rows are "
                  "scored by the cosine of the rebuilt table rows (the cosine column; the y axis 1 \u2212 "
                  "mean cosine), and the Compare tab compares its sentence embeddings before and after.";
}

void MainWindow::addCompressionRow(const RunSummary& r, const CompressionRequest& request,
                                   const RunTarget& target, const QString& model)
{
    const int row = results_->addRow(r);
    applyResultsYAxis(); // the first encoder row of a table with no other model's
    ResultRow& record = result_rows_.at(row);
    record.request = request; // Copy as command etc. reproduce this one run, also a sweep's
    if (r.ratio > 1)
        statusBar()->showMessage(
            QString("%1 %2 stores %3x the original (ratio > 1): not a compression")
                .arg(QString::fromStdString(r.method), QString::fromStdString(r.parameters))
                .arg(r.ratio, 0, 'f', 2));
    if (target.host.empty()) // a remote row's model stays on the host (Slurm's refits here)
        record.source = RowSource{model, request};
    results_->selectRow(row);
    updateExportEnabled();
}

int MainWindow::runChain(const nlohmann::ordered_json& chosen, const RunTarget& target)
{
    if (model_path_.isEmpty()) {
        statusBar()->showMessage("Open a model first");
        return -1;
    }
    nlohmann::ordered_json pipeline = chosen;
    pipeline["model"] = model_path_.toStdString();
    std::string label;
    try {
        check_chain(pipeline); // the engine's checks, against this model's config
        label = pipeline_label(pipeline_from_json(pipeline));
    } catch (const std::exception& e) {
        statusBar()->showMessage(QString("Not run: %1").arg(QString::fromUtf8(e.what())));
        return -1;
    }
    clearRefusal();
    auto job_id = std::make_shared<std::atomic<int>>(0);
    const StatusFn status = jobStatus(job_id);
    const std::string where = target.slurm ? " on Slurm" : target.host.empty() ? "" : " on " + target.host;
    const int id = jobs_.submit(
        QString::fromStdString("compress chain " + label + where),
        [this, pipeline, target, status](const ProgressFn& progress) -> std::function<void()> {
            const auto r = compress_chain_and_evaluate(pipeline, target, progress, status);
            return [this, r, pipeline, here = target.host.empty()] { addChainRow(r, pipeline, here); };
        });
    job_id->store(id);
    return id;
}

void MainWindow::addChainRow(const RunSummary& r, const nlohmann::ordered_json& pipeline, bool ran_here)
{
    const int row = results_->addRow(r); // method "chain", parameters its steps: a point of its own
    applyResultsYAxis();
    ResultRow& record = result_rows_.at(row);
    record.chain = pipeline;            // Copy as command etc. reproduce the chain
    record.chain_exportable = ran_here; // as a run's row: a remote one's model stays on the host
    results_->selectRow(row);
    updateExportEnabled();
}

int MainWindow::runSweep(const std::vector<CompressionRequest>& chosen, const RunTarget& target)
{
    if (chosen.size() == 1)
        return runCompression(chosen.front(), target);
    if (chosen.empty()) {
        statusBar()->showMessage("Not run: " + method_panel_->problem());
        return -1;
    }
    if (model_path_.isEmpty()) {
        statusBar()->showMessage("Open a model first");
        return -1;
    }
    std::vector<CompressionRequest> requests = chosen;
    for (auto& request : requests) { // all or nothing: a refused run stops the sweep before it starts
        request.model = model_path_.toStdString();
        if (const QString refused = encoderRequest(request); !refused.isEmpty()) {
            statusBar()->showMessage("Not run: " + refused);
            return -1;
        }
        try {
            check_request(request, model_dim_);
        } catch (const std::exception& e) {
            statusBar()->showMessage(
                QString("Not run: %1: %2")
                    .arg(QString::fromStdString(describe_request(request)), QString::fromUtf8(e.what())));
            return -1;
        }
    }
    clearRefusal();
    const auto n = static_cast<int>(requests.size());
    auto job_id = std::make_shared<std::atomic<int>>(0);
    // The job list's state: which run of how many ("3/16: pca rank 24"), or the array's.
    const StatusFn status = jobStatus(job_id);
    const QString name =
        QString("sweep of %1: %2 .. %3%4")
            .arg(n)
            .arg(QString::fromStdString(describe_request(requests.front())),
                 QString::fromStdString(describe_run(requests.back(), target)), scoredAs(requests.front()));
    const int id = jobs_.submit(
        name,
        [this, requests, target, status,
         path = model_path_](const ProgressFn& progress) -> std::function<void()> {
            // Each row as its run ends (queued to the GUI thread in order, before the job's end).
            const auto row = [this, &requests, target, path](size_t i, const RunSummary& r) {
                QMetaObject::invokeMethod(
                    this,
                    [this, r, request = requests[i], target, path] {
                        addCompressionRow(r, request, target, path);
                    },
                    Qt::QueuedConnection);
            };
            const auto failed = compress_and_evaluate_sweep(requests, target, progress, status, row);
            if (!failed.empty())
                throw std::runtime_error(std::to_string(failed.size()) + " of " +
                                         std::to_string(requests.size()) + " runs failed: " + failed.front());
            return {};
        });
    job_id->store(id);
    return id;
}

int MainWindow::exportCompressed(int row, const QString& dir, bool dense, bool overwrite)
{
    const ResultRow* record = result_rows_.find(row);
    if (!record || !record->exportable() || dir.isEmpty()) {
        statusBar()->showMessage("Select a finished compression row to export");
        return -1;
    }
    const auto& r = results_->rows()[row];
    // A run's row is written from memory or fitted again; a chain's runs its steps again.
    const std::optional<CompressionRequest> request =
        record->source ? std::optional(record->source->request) : std::nullopt;
    const nlohmann::ordered_json pipeline = record->source ? nlohmann::ordered_json() : *record->chain;
    return jobs_.submit(
        QString("export %1 %2%3 to %4")
            .arg(QString::fromStdString(r.method), QString::fromStdString(r.parameters),
                 dense ? " (+ dense)" : "", dir),
        [this, request, pipeline, dir, dense,
         overwrite](const ProgressFn& progress) -> std::function<void()> {
            const auto what = request
                                  ? export_compressed(*request, dir.toStdString(), dense, overwrite, progress)
                                  : export_chain(pipeline, dir.toStdString(), dense, overwrite, progress);
            return [this, what, dir] {
                statusBar()->showMessage(QString("Wrote %1 (%2)").arg(dir, QString::fromStdString(what)));
            };
        });
}

void MainWindow::analyse(const QString& path)
{
    jobs_.submit(
        "spectrum of the token embedding", [this, path](const ProgressFn& progress) -> std::function<void()> {
            // Converted here, on the worker: a 150k-row model's vectors take the GUI
            // thread tens of ms (issue 21 item 5's 100 ms stall bound).
            const auto data = spectrum_view_data(embedding_spectrum(path.toStdString(), progress), path);
            return [this, data] {
                spectrum_->setData(data);
                spectrum_->setRank(std::max(1, static_cast<int>(data.eigenvalues.size()) / 4));
            };
        });
    if (model_encoder_) {
        views::RankAllocationData none;
        none.unavailable =
            "FLAT-LLM's importance and rank allocation are computed on decoders; this model is an "
            "encoder";
        allocation_->setData(none);
        return;
    }
    jobs_.submit("FLAT-LLM importance (bundled sample text)",
                 [this, path](const ProgressFn& progress) -> std::function<void()> {
                     const auto r =
                         importance_allocations(path.toStdString(), default_sample_text(), 32, 128, progress);
                     return [this, r, path] {
                         allocation_->setData(allocation_view_data(r, path));
                         head_overlays_ = value_head_overlays(r);
                         applySpectrumOverlays();
                     };
                 });
}

bool MainWindow::takeTableDefault(const CompressionRequest& base, const QString& path)
{
    const QString key = QString::fromStdString(base.method) + "\n" + path;
    if (!picks_default_from_table(base.method) || defaults_chosen_.contains(key))
        return false; // once per method and model
    defaults_chosen_.insert(key);
    return true;
}

void MainWindow::applyTableDefault(const TableDefault& picked, const CompressionRequest& base,
                                   const QString& path)
{
    if (path != model_path_)
        return;
    // Only the fields the method picked: the user's other edits stay, and so does
    // the panel's method (the Tensor-Train tab picks tt's eps whatever is shown).
    const QString shown = method_panel_->method();
    auto now = method_panel_->request(QString::fromStdString(base.method));
    const auto before = request_json(base), after = request_json(picked.request);
    for (const auto& [field, value] : after.items())
        if (!before.contains(field) || before[field] != value)
            set_request_field(now, field, value);
    {
        const QSignalBlocker quiet(method_panel_); // passing through: no methodChanged
        method_panel_->setRequest(now);
        method_panel_->setMethod(shown);
    }
    statusBar()->showMessage(QString::fromStdString(picked.how));
}

void MainWindow::chooseTableDefault(const QString& path)
{
    const CompressionRequest base = method_panel_->request();
    if (!takeTableDefault(base, path))
        return;
    jobs_.submit(QString::fromStdString(base.method) + ": a default from the table",
                 [this, path, base](const ProgressFn& progress) -> std::function<void()> {
                     const auto picked = table_default(path.toStdString(), base, progress);
                     return [this, picked, path, base] {
                         if (picked && method_panel_->request().method == base.method)
                             applyTableDefault(*picked, base, path);
                     };
                 });
}

int MainWindow::compareSpectrum(const QString& other)
{
    if (model_path_.isEmpty() || other.isEmpty())
        return -1;
    return jobs_.submit("spectrum of " + other + " (overlay)",
                        [this, other](const ProgressFn& progress) -> std::function<void()> {
                            const auto r = embedding_spectrum(other.toStdString(), progress);
                            return [this, r, other] {
                                const QString name = QFileInfo(other).fileName();
                                model_overlays_.erase(
                                    std::remove_if(model_overlays_.begin(), model_overlays_.end(),
                                                   [&](const auto& o) { return o.name == name; }),
                                    model_overlays_.end());
                                model_overlays_.push_back(spectrum_overlay(r, name));
                                applySpectrumOverlays();
                            };
                        });
}

void MainWindow::showValueHeadSpectra(bool on)
{
    value_heads_->setChecked(on); // toggled -> applySpectrumOverlays
    applySpectrumOverlays();
}

void MainWindow::applySpectrumOverlays()
{
    auto all = model_overlays_;
    if (value_heads_->isChecked())
        all += head_overlays_;
    if (all.isEmpty())
        spectrum_->clearOverlays();
    else
        spectrum_->setOverlays(all);
}

void MainWindow::computeShownView()
{
    if (showing(fourier_))
        computeFourierMap();
    else if (showing(tt_))
        computeTensorTrain();
    else if (showing(lle_))
        computeNeighbourGraph();
}

int MainWindow::computeFourierMap()
{
    if (model_path_.isEmpty() || lazy_started_.contains("fourier"))
        return -1;
    lazy_started_.insert("fourier");
    // Within the loaded model's vocabulary, whatever the controls held before.
    const int64_t first = std::min<int64_t>(fourier_first_->value(), std::max<int64_t>(model_vocab_ - 2, 0));
    const int64_t end = std::min<int64_t>(first + fourier_count_->value(), model_vocab_);
    return jobs_.submit("Fourier token map",
                        [this, path = model_path_, dir = fourier_dir_, first,
                         end](const ProgressFn& progress) -> std::function<void()> {
                            const auto r =
                                fourier_map(path.toStdString(), dir.toStdString(), first, end, progress);
                            return [this, data = fourier_view_data(r, path)] { fourier_->setData(data); };
                        });
}

int MainWindow::computeTensorTrain()
{
    if (model_path_.isEmpty() || lazy_started_.contains("tt"))
        return -1;
    lazy_started_.insert("tt");
    // The tab opens on the candidate the panel's tt runs: its eps (picked from this
    // model's table first, if not yet) at the balanced shape.
    const CompressionRequest base = method_panel_->request("tt");
    const bool pick = takeTableDefault(base, model_path_);
    tt_->setComputing("computing the Tensor-Train candidates ...");
    return tt_job_ = jobs_.submit(
               "Tensor-Train candidates",
               [this, path = model_path_, base, pick](const ProgressFn& progress) -> std::function<void()> {
                   const auto picked =
                       pick ? table_default(path.toStdString(), base, progress) : std::nullopt;
                   const double eps = picked ? picked->request.eps : base.eps;
                   const auto r = tensor_train_candidates(path.toStdString(), {0.1, 0.2, 0.3, 0.4, 0.5}, 6,
                                                          progress, kTensorTrainCandidateRows, eps);
                   return [this, data = tt_view_data(r, path), picked, base, path] {
                       if (picked)
                           applyTableDefault(*picked, base, path);
                       tt_->setData(data);
                   };
               });
}

int MainWindow::computeNeighbourGraph()
{
    if (model_path_.isEmpty() || lazy_started_.contains("lle"))
        return -1;
    lazy_started_.insert("lle");
    const double keep = lle_keep_->value();
    const int64_t k = lle_k_->value();
    return jobs_.submit(
        "LLE neighbour graph",
        [this, path = model_path_, keep, k](const ProgressFn& progress) -> std::function<void()> {
            const auto r = neighbour_graph(path.toStdString(), default_sample_text(), keep, k, progress);
            return [this, data = lle_view_data(r, path)] { lle_->setData(data); };
        });
}

void MainWindow::chooseFourierDirectory()
{
    const QString dir = QFileDialog::getExistingDirectory(this, "Open a --method fourier model directory");
    if (dir.isEmpty())
        return;
    fourier_dir_ = dir;
    lazy_started_.remove("fourier");
    computeFourierMap();
}

} // namespace embedlab::app
