// The main window: the model panel (facts + parameter breakdown), the
// spectrum, IPRS allocation, results, Fourier map, Tensor-Train and LLE views,
// and the job list. Every engine call runs as a job on the JobController's
// engine thread; the GUI thread never blocks. The Fourier, TT and LLE views
// are computed when first shown for a model (they cost seconds to minutes).
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QLabel>
#include <QMainWindow>
#include <QSet>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "analyses.hpp"
#include "job_controller.hpp"
#include "model_summary.hpp"
#include "plot_data_export.hpp"
#include "result_rows.hpp"
#include "spectrum_view.hpp"

class QAction;
class QDragEnterEvent;
class QDropEvent;
class QMimeData;
class QCheckBox;
class QCustomPlot;
class QDoubleSpinBox;
class QMenu;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTreeWidget;
class QTreeWidgetItem;

namespace embedlab::views {
class FourierMapView;
class NeighbourGraphView;
class ParameterBreakdownChart;
class RankAllocationView;
class ResultsView;
class SpectrumView;
class TensorTrainView;
} // namespace embedlab::views

namespace embedlab::app {

class JobList;
class MethodPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;
    void openModel(const QString& path);
    // "model", "spectrum", "allocation", "results", "fourier", "tt", "lle"
    bool showView(const QString& name);
    static QStringList viewNames();
    // Queues `request` on the shown model (its model field is replaced by it) on
    // `target`; a results row is added when it finishes. Returns the job id, or -1
    // (no model, or embedlab::check_request refused it: the status bar says why).
    int runCompression(const CompressionRequest& request, const RunTarget& target = {});
    // The method panel's choices (and target) with this method, rank (pca, svd) and eps (tt).
    int runCompression(const QString& method, int rank, double eps);
    // Queues a sweep (the method panel's requests()) as ONE job on `target`: its runs
    // one after another (Slurm: one job array), each adding its results row as it
    // ends; its cancel stops the rest. One request: runCompression. -1 as there, or
    // when a request is refused (all or nothing).
    int runSweep(const std::vector<CompressionRequest>& requests, const RunTarget& target = {});
    // Queues a chain (issue 60: the method panel's chainJson(), the engine's pipeline request;
    // its model replaced by the shown one) as ONE job on `target`; its row is the chain's own
    // (labelled by its steps), copied as the CLI's --then line, the JSON pipeline job or a
    // compress_chain call. -1 as runCompression, when the engine refuses the chain.
    int runChain(const nlohmann::ordered_json& pipeline, const RunTarget& target = {});
    // Queues writing results row `row`'s compressed model to `dir` (the CLI's
    // compress layout; `dense` adds dir/dense/). A chain's row runs its pipeline again
    // into `dir` (export_chain), as the job it ran as. Returns the job id, -1 if the row
    // did not come from a compression job or chain run here (a remote or reopened row).
    // An existing dir fails unless `overwrite`.
    int exportCompressed(int row, const QString& dir, bool dense, bool overwrite);
    // Queues the spectrum of `other` as an overlay on the Spectrum tab (-1: no model).
    int compareSpectrum(const QString& other);
    // Overlays FLAT-LLM's per-head value spectra (from the importance job) or not.
    void showValueHeadSpectra(bool on);
    // Queue the lazy views' jobs now (-1: no model or already done/queued).
    int computeFourierMap();
    int computeTensorTrain();
    int computeNeighbourGraph();
    QCustomPlot* currentPlot() const; // the figure File > Export figure saves
    // File > Export data (Ctrl+D): the current tab's plotted values as CSV, a file per
    // panel (views/plot_data_export.hpp: the first to `file`, the others beside it).
    // The LLE tab writes the neighbour graph's coordinates (exportCoordinatesCsv) to
    // `file`, then the damage panel's table. "" or the problem; `written`: the files.
    QString exportData(const QString& file, QStringList* written = nullptr);
    QVector<views::DataTable> currentDataTables() const; // the current tab's, but the LLE graph's
    JobList* jobList() const { return job_list_; }
    JobController& jobs() { return jobs_; }
    views::SpectrumView* spectrumView() const { return spectrum_; }
    views::RankAllocationView* allocationView() const { return allocation_; }
    views::ResultsView* resultsView() const { return results_; }
    views::FourierMapView* fourierView() const { return fourier_; }
    views::TensorTrainView* tensorTrainView() const { return tt_; }
    views::NeighbourGraphView* neighbourView() const { return lle_; }
    MethodPanel* methodPanel() const { return method_panel_; }
    // Asks job `id` to stop; the job list says "cancelling" until it has.
    void cancelJob(int id);
    QString aboutText() const; // Help > About: versions and the loaded model's facts
    // File > Save/Open session: the results rows, the method panel's request
    // (request_json) and target, and the model, as JSON ({"format": "embedlab-session",
    // "version": 2}). Version 1's sessions (the panel's fields under "method") open
    // too. False (status bar says why) on failure.
    bool saveSession(const QString& file);
    bool openSession(const QString& file);
    // Closing with results not saved (session or results export) asks first; tests turn it off.
    void setAskBeforeDiscarding(bool ask) { ask_before_discarding_ = ask; }
    QString shortcutsText() const; // Help > Keyboard shortcuts, one "keys<TAB>action" per line
    // Why Export data (or, with no plot at all, Export figure) has nothing to write from
    // the current tab ("": something to export): said before any dialog opens.
    QString nothingToExport() const;
    // The file an export dialog proposes: in the folder last exported to, named by the
    // model and the tab ("tinyllama-compare.pdf").
    QString proposedExportFile(const QString& suffix) const;
    // The model a drag carries: the first local directory, .gguf or .bin among its
    // URLs ("" if none); dropping it opens it.
    static QString droppedModel(const QMimeData* data);

    // The closing question ("" when nothing is unsaved): rows added since the last
    // save or export, or rows deleted from what was saved.
    QString unsavedText() const;

    // Results row `row`'s request, to run it again (issue 41 item 12): the
    // `embedlab-cli compress` line (sh-quoted; fields compress has no flag for, such as
    // the panel's eval_tokens, named in a trailing # comment), the request's JSON as a
    // job file holds it, or the Python API's embedlab.compress call. "" for a row that
    // came from no compression job here (a session's). The row menu's Copy as command /
    // JSON request / Python actions put these on the clipboard.
    enum class RowText { Command, JsonRequest, Python };
    QString rowText(int row, RowText as) const;

signals:
    void modelShown(bool ok);

protected:
    void closeEvent(QCloseEvent* event) override;
    // The window's shortcuts (Ctrl+E, ...) win over a focused text or spin field.
    bool eventFilter(QObject* watched, QEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    // The current tab's plot and the tables Export data writes from it (none: Compare).
    struct TabPlot {
        QCustomPlot* plot = nullptr;
        std::function<QVector<views::DataTable>()> tables;
    };
    TabPlot currentTabPlot() const;
    void showSummary(const ModelSummary& s);
    void resetViews(); // every tab empty, for a newly loaded model
    void showJobStatus(int id, const QString& status);
    StatusFn jobStatus(const std::shared_ptr<std::atomic<int>>& job_id);
    void analyse(const QString& path);            // spectrum + importance jobs for the shown model
    void computeShownView();                      // the lazy view on the current tab, if not done yet
    void chooseTableDefault(const QString& path); // the panel method's default from the table (tt's eps)
    bool takeTableDefault(const CompressionRequest& base, const QString& path); // false: chosen already
    void applyTableDefault(const TableDefault& picked, const CompressionRequest& base, const QString& path);
    void chooseModelDirectory();
    void chooseModelFile();
    void chooseFourierDirectory();
    void trackJobs();
    void exportResults();
    void chooseExport(); // the export dialog for the selected results row
    void updateExportEnabled();
    // A finished run's results row, remembering its request (and, local, its source).
    // An encoder's request as the engine runs it (run_compression scores a masked-LM head by
    // pseudo-perplexity; an encoder without one has no evaluation text); the refusal, saying
    // what applies instead, or "" (issue 61 item 6).
    QString encoderRequest(CompressionRequest& request) const;
    // What a run's job computes, for its name: " + perplexity", " + pseudo-perplexity", ...
    QString scoredAs(const CompressionRequest& request) const;
    // The Results tab's note on an encoder's PPL cells ("" for a decoder).
    static QString encoderNote(const QString& model, bool masked_lm);
    void addCompressionRow(const RunSummary& row, const CompressionRequest& request, const RunTarget& target,
                           const QString& model);
    void addChainRow(const RunSummary& row, const nlohmann::ordered_json& pipeline, bool ran_here);
    void exportFigure();
    void exportDataInteractively();
    void rememberModel(const QString& path);
    void fillRecentMenu();
    QWidget* withControls(QWidget* view, QWidget* controls);
    // A tab whose page scrolls when the window is shorter or narrower than the page's
    // minimum: no page sets the window's minimum size (issue 61: a 768-px screen with a
    // taskbar leaves about 700 px for the window).
    void addPage(QWidget* page, const QString& name);
    QWidget* pageOf(const QWidget* view) const; // the tab page holding `view` (null: none)
    bool showing(const QWidget* view) const;    // `view` is on the current tab
    void applySpectrumOverlays();
    // Issue 61 item 4: the Results filter shows the loaded model's rows (all while it has
    // none), and the y axis is 1 − mean cosine while every row shown is an encoder's
    // without a perplexity (a masked-LM encoder's rows have Δ ln PPL).
    void followModelInResults();
    void applyResultsYAxis();

    QTabWidget* tabs_;
    QLabel* facts_;
    views::ParameterBreakdownChart* chart_;
    views::SpectrumView* spectrum_;
    views::RankAllocationView* allocation_;
    views::ResultsView* results_;
    views::FourierMapView* fourier_;
    views::TensorTrainView* tt_;
    views::NeighbourGraphView* lle_;
    MethodPanel* method_panel_;
    QSpinBox* fourier_first_;
    QSpinBox* fourier_count_;
    QString fourier_dir_;
    QDoubleSpinBox* lle_keep_;
    QSpinBox* lle_k_;
    QMenu* recent_;
    QAction* export_model_;
    QAction* copy_command_; // the selected results row as an embedlab-cli line (rowText)
    QAction* copy_json_;    // ... as its request's JSON
    QAction* copy_python_;  // ... as a Python call
    QPushButton* export_button_;
    // What produced each results row (by row index): its request, its source (exportable),
    // its chain. One record a row, so deleting, undoing and reopening move them together.
    ResultRows result_rows_;
    // A deleted results row's record, until Edit > Undo puts it back
    // (the results view's undo stack: last deleted, first restored).
    struct DeletedRow {
        int row = -1;
        ResultRow record;
        bool saved = false; // among the first saved_rows_
    };
    QVector<DeletedRow> deleted_rows_;
    QAction* undo_;
    QAction* redo_;
    QVector<views::SpectrumOverlay> model_overlays_; // other models' spectra
    QVector<views::SpectrumOverlay> head_overlays_;  // the shown model's value heads
    QCheckBox* value_heads_;
    JobList* job_list_;               // the Jobs dock's
    int saved_rows_ = 0;              // results rows when last saved or exported (the first ones)
    bool deleted_since_save_ = false; // a saved row was deleted since
    bool ask_before_discarding_ = true;
    QHash<int, QString> load_jobs_; // load job id -> the path it loads
    QString facts_html_;            // the loaded model's facts
    QSet<QString> defaults_chosen_; // "method\nmodel" whose table default was chosen
    QString model_path_;            // the shown model ("" until one loaded)
    int64_t model_dim_ = 0;         // its hidden size
    bool model_encoder_ = false;    // an encoder: runs are scored without perplexity
    bool model_masked_lm_ = false;  // and one with a masked-LM head: pseudo-perplexity
    // Every encoder loaded in this session or a reopened one (rows' model field): whether it
    // has a masked-LM head. Saved with the session, for the y axis rule and the PPL notes.
    QHash<QString, bool> encoder_models_;
    QString y_before_encoders_; // the y axis before applyResultsYAxis chose the cosine ("": none)
    bool y_symlog_before_encoders_ = false;
    int tt_job_ = -1;            // the Tensor-Train candidates' job (the tab says computing meanwhile)
    int message_tab_ = -1;       // the tab the status bar's message was said on
    void clearRefusal();         // a "Not run: ..." message, once a run or update is queued
    int64_t model_vocab_ = 0;    // and vocabulary
    QSet<QString> lazy_started_; // "fourier", "tt", "lle" queued for model_path_
    JobController jobs_;
};

} // namespace embedlab::app
