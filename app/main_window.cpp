#include "main_window.hpp"

#include <cctype>
#include <cmath>

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDesktopServices>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QKeyEvent>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QRadioButton>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QUndoStack>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <optional>

#include "analyses.hpp"
#include "checked_spin_box.hpp"
#include "compare_tab.hpp"
#include "compare_view.hpp"
#include "damage_tab.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/pipeline_request.hpp"
#include "figure_export.hpp"
#include "fourier_map_view.hpp"
#include "jobs_dock.hpp"
#include "method_flags.hpp"
#include "method_panel.hpp"
#include "model_summary.hpp"
#include "neighbour_graph_view.hpp"
#include "parameter_breakdown_chart.hpp"
#include "rank_allocation_view.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"
#include "token_damage_view.hpp"
#include "view_data.hpp"

namespace embedlab::app {

namespace {
constexpr int kRecentModels = 8;
} // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), tabs_(new QTabWidget(this)), facts_(new QLabel(this)),
      chart_(new views::ParameterBreakdownChart(this)), spectrum_(new views::SpectrumView(this)),
      allocation_(new views::RankAllocationView(this)), results_(new views::ResultsView(this)),
      fourier_(new views::FourierMapView(this)), tt_(new views::TensorTrainView(this)),
      lle_(new views::NeighbourGraphView(this)), method_panel_(new MethodPanel(this)),
      fourier_first_(new CheckedSpinBox(this)), fourier_count_(new CheckedSpinBox(this)),
      lle_keep_(new CheckedDoubleSpinBox(this)), lle_k_(new CheckedSpinBox(this)),
      export_button_(new QPushButton("Export compressed model...", this))
{
    setWindowTitle("EmbedLab");
    setAcceptDrops(true); // a model directory or file dropped on the window opens it
    auto* model_panel = new QWidget(this);
    auto* layout = new QVBoxLayout(model_panel);
    facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    facts_->setWordWrap(true);
    layout->addWidget(facts_);
    layout->addWidget(chart_, 1);
    addPage(model_panel, "Model");
    auto* spectrum_controls = new QWidget(this);
    auto* sc = new QHBoxLayout(spectrum_controls);
    sc->setContentsMargins(0, 0, 0, 0);
    auto* compare = new QPushButton("Compare with model", this);
    compare->setToolTip("Overlay another model's embedding spectrum (each curve as its share of variance)");
    auto* compare_menu = new QMenu(compare);
    connect(compare_menu, &QMenu::aboutToShow, this, [this, compare_menu] {
        compare_menu->clear();
        for (const QString& path : QSettings().value("models/recent").toStringList())
            if (path != model_path_)
                compare_menu->addAction(path, this, [this, path] { compareSpectrum(path); });
        compare_menu->addSeparator();
        compare_menu->addAction("Model directory...", this, [this] {
            const QString dir = QFileDialog::getExistingDirectory(this, "Compare with a model directory");
            if (!dir.isEmpty())
                compareSpectrum(dir);
        });
        compare_menu->addAction("Model file (.gguf, .bin)...", this, [this] {
            const QString file = QFileDialog::getOpenFileName(this, "Compare with a model file", {},
                                                              "Models (*.gguf *.bin);;All files (*)");
            if (!file.isEmpty())
                compareSpectrum(file);
        });
    });
    compare->setMenu(compare_menu);
    value_heads_ = new QCheckBox("FLAT-LLM value-head spectra", this);
    value_heads_->setToolTip(
        "Overlay the eigenvalues of every layer's per-head value covariance C_h from the\n"
        "FLAT-LLM calibration on the bundled sample text (METHODS 3), one colour per layer");
    connect(value_heads_, &QCheckBox::toggled, this, &MainWindow::applySpectrumOverlays);
    auto* clear = new QPushButton("Clear overlays", this);
    connect(clear, &QPushButton::clicked, this, [this] {
        model_overlays_.clear();
        value_heads_->setChecked(false);
        applySpectrumOverlays();
    });
    sc->addWidget(compare);
    sc->addWidget(value_heads_);
    sc->addWidget(clear);
    sc->addStretch(1);
    addPage(withControls(spectrum_, spectrum_controls), "Spectrum");
    addPage(allocation_, "IPRS allocation");
    auto* results_controls = new QWidget(this);
    auto* rc = new QHBoxLayout(results_controls);
    rc->setContentsMargins(0, 0, 0, 0);
    rc->addWidget(method_panel_, 1);
    rc->addWidget(export_button_);
    export_button_->setToolTip("Write the selected row's compressed model (factorised, optionally dense)");
    connect(export_button_, &QPushButton::clicked, this, &MainWindow::chooseExport);
    results_->setBaselineMethods(baseline_methods()); // quant: a method read against it at equal bytes
    addPage(withControls(results_, results_controls), "Results");
    connect(method_panel_, &MethodPanel::methodChanged, this, [this] {
        if (!model_path_.isEmpty())
            chooseTableDefault(model_path_);
    });
    connect(method_panel_, &MethodPanel::runRequested, this, [this] {
        if (const auto chain = method_panel_->chainJson()) // Then... made a chain: one job
            runChain(*chain, method_panel_->target());
        else
            runSweep(method_panel_->requests(), method_panel_->target());
    });
    // Issue 61 item 7: a refused Run says why where the user looks after pressing it.
    connect(method_panel_, &MethodPanel::runRefused, this,
            [this](const QString& reason) { statusBar()->showMessage("Not run: " + reason); });
    // The rank dragged on the spectrum is the rank a pca/svd run uses.
    connect(spectrum_, &views::SpectrumView::rankChanged, method_panel_, &MethodPanel::setRank);
    // Issue 41 item 12: a row's run again, as the CLI line, the job file or the Python call.
    const auto copy_row = [this](const QString& name, const QString& text, RowText as) {
        auto* action = new QAction(text, this);
        action->setObjectName(name);
        connect(action, &QAction::triggered, this, [this, as] {
            const QString copied = rowText(results_->selectedRow(), as);
            if (copied.isEmpty()) {
                statusBar()->showMessage("Select a compression row run in this session to copy");
                return;
            }
            QGuiApplication::clipboard()->setText(copied);
            statusBar()->showMessage("Copied to the clipboard");
        });
        return action;
    };
    copy_command_ = copy_row("copy_command", "Copy as &command", RowText::Command);
    copy_command_->setToolTip("The embedlab-cli compress line that runs this row's request");
    copy_json_ = copy_row("copy_json_request", "Copy as &JSON request", RowText::JsonRequest);
    copy_json_->setToolTip("The row's request as a job file holds it (embedlab-cli worker, remote run)");
    copy_python_ = copy_row("copy_python", "Copy as &Python", RowText::Python);
    copy_python_->setToolTip("The row's request as an embedlab.compress call (docs/python.md)");
    results_->table()->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(results_->table(), &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
        const QModelIndex index = results_->table()->indexAt(at);
        if (!index.isValid())
            return;
        results_->table()->setCurrentIndex(index); // the row under the cursor is the one acted on
        QMenu menu(this);
        menu.addAction(export_model_);
        const ResultRow* record = result_rows_.find(results_->selectedRow());
        const bool has_request = record && (record->request || record->chain);
        for (auto* copy : {copy_command_, copy_json_, copy_python_}) {
            copy->setEnabled(has_request);
            menu.addAction(copy);
        }
        if (results_->selectedRow() >= 0)
            menu.addAction("Delete row", this, [this] { results_->removeRow(results_->selectedRow()); });
        menu.exec(results_->table()->viewport()->mapToGlobal(at));
    });

    fourier_first_->setObjectName("fourier_first");
    fourier_count_->setObjectName("fourier_count");
    lle_k_->setObjectName("lle_k");
    job_list_ = new JobList(jobs_, this); // "job_list"
    connect(job_list_, &JobList::cancelRequested, this, &MainWindow::cancelJob);
    fourier_first_->setPrefix("ids from ");
    fourier_first_->setRange(0, 1 << 30);
    fourier_count_->setPrefix("count ");
    fourier_count_->setRange(2, 4096);
    fourier_count_->setValue(256);
    auto* fourier_controls = new QWidget(this);
    auto* fc = new QHBoxLayout(fourier_controls);
    fc->setContentsMargins(0, 0, 0, 0);
    auto* fourier_dir = new QPushButton("Fitted fourier directory...", this);
    auto* fourier_update = new QPushButton("Update", this);
    connect(fourier_dir, &QPushButton::clicked, this, &MainWindow::chooseFourierDirectory);
    connect(fourier_update, &QPushButton::clicked, this, [this] {
        if (const QString p = first_problem({fourier_first_, fourier_count_}); !p.isEmpty()) {
            statusBar()->showMessage("Not run: " + p);
            return;
        }
        lazy_started_.remove("fourier");
        if (computeFourierMap() > 0)
            clearRefusal();
    });
    for (QWidget* w : std::initializer_list<QWidget*>{
             fourier_first_, fourier_count_,
             new ProblemLabel({fourier_first_, fourier_count_}, "Not updated while ", this), fourier_dir,
             fourier_update})
        fc->addWidget(w);
    fc->addStretch(1);
    addPage(withControls(fourier_, fourier_controls), "Fourier map");
    addPage(tt_, "Tensor-Train");

    lle_keep_->setPrefix("keep ratio ");
    lle_keep_->setRange(0.01, 1.0);
    lle_keep_->setSingleStep(0.05);
    lle_keep_->setValue(0.5);
    lle_k_->setPrefix("k = ");
    lle_k_->setRange(1, 64);
    lle_k_->setValue(5);
    auto* lle_controls = new QWidget(this);
    auto* lc = new QHBoxLayout(lle_controls);
    lc->setContentsMargins(0, 0, 0, 0);
    auto* lle_update = new QPushButton("Update (frequencies from the bundled sample text)", this);
    connect(lle_update, &QPushButton::clicked, this, [this] {
        if (const QString p = first_problem({lle_keep_, lle_k_}); !p.isEmpty()) {
            statusBar()->showMessage("Not run: " + p);
            return;
        }
        lazy_started_.remove("lle");
        if (computeNeighbourGraph() > 0)
            clearRefusal();
    });
    for (QWidget* w : std::initializer_list<QWidget*>{
             lle_keep_, lle_k_, new ProblemLabel({lle_keep_, lle_k_}, "Not updated while ", this),
             lle_update})
        lc->addWidget(w);
    lc->addStretch(1);
    addPage(withControls(lle_, lle_controls), "LLE neighbours");
    // Which tokens a results row damages: beside the graph, which it colours.
    auto* damage = new DamagePanel(
        lle_, jobs_,
        [this] {
            QVector<DamagePanel::Run> runs;
            const auto& rows = results_->rows();
            for (int row = 0; row < static_cast<int>(rows.size()); ++row)
                if (const ResultRow* record = result_rows_.find(row); record && record->source)
                    runs.push_back({QString::fromStdString(rows[row].method + " " + rows[row].parameters) +
                                        " (" + QFileInfo(record->source->model).fileName() + ")",
                                    record->source->request, record->source->model});
            return runs;
        },
        this);
    lle_->addSidePage(damage, "Damage");
    // The map's t-SNE: a job on the engine thread, as the graph itself.
    connect(lle_, &views::NeighbourGraphView::layoutRequested, this,
            [this](double perplexity, int iterations, qint64 seed, int sample) {
                if (model_path_.isEmpty())
                    return;
                const TsneOptions o{.perplexity = perplexity,
                                    .iterations = iterations,
                                    .seed = static_cast<uint64_t>(seed),
                                    .sample = sample};
                jobs_.submit("t-SNE layout", [this, path = model_path_, o](const ProgressFn& progress) {
                    const auto r = neighbour_layout(path.toStdString(), o, progress);
                    return std::function<void()>(
                        [this, layout = tsne_view_layout(r)] { lle_->setLayout(layout); });
                });
            });
    connect(tabs_, &QTabWidget::currentChanged, damage, [this, damage] {
        if (showing(lle_))
            damage->refreshRuns();
    });
    // Compare: the results rows that ran here, beside their original; a worst token opens the graph.
    auto* compare_view = new views::CompareView(this);
    addPage(compare_view, "Compare");
    auto* compare_tab = new CompareTab(
        compare_view, jobs_,
        [this] {
            QVector<CompareTab::Run> runs;
            for (int row = 0; row < static_cast<int>(results_->rows().size()); ++row) {
                const ResultRow* record = result_rows_.find(row);
                if (!record || !record->source)
                    continue;
                const RowSource& source = *record->source;
                const auto& r = results_->rows()[row];
                const QString name = QString::fromStdString(r.method + " " + r.parameters) + " (" +
                                     QFileInfo(source.model).fileName() + ")";
                runs.push_back({row, name, source.request, encoder_models_.contains(source.model)});
            }
            return runs;
        },
        [this](int id) { cancelJob(id); }, this);
    connect(compare_view, &views::CompareView::tokenChosen, this, [this, compare_tab](int id) {
        showView("lle");
        // The rare/common split is LLE's: another method's token is only located on the map.
        const CompareTab::Run* run = compare_tab->shownRun();
        const bool lle_run = !run || run->request.method.rfind("lle", 0) == 0;
        lle_->showToken(id, lle_run ? QString() : run->name);
    });
    // The run box follows a row chosen on the Results tab since the Compare tab was last
    // shown, not every return to it (its computed views are for the run it shows).
    auto follow_row = std::make_shared<int>(-1);
    connect(results_, &views::ResultsView::rowSelected, this, [follow_row](int row) { *follow_row = row; });
    connect(results_, &views::ResultsView::rowRemoved, this, [follow_row] { *follow_row = -1; });
    connect(tabs_, &QTabWidget::currentChanged, compare_tab, [this, compare_view, compare_tab, follow_row] {
        if (showing(compare_view))
            compare_tab->refreshRuns(std::exchange(*follow_row, -1));
    });
    connect(tabs_, &QTabWidget::currentChanged, this, &MainWindow::computeShownView);
    setCentralWidget(tabs_);
    // A message said on one tab (a refusal, the Tensor-Train tab's pick) is not left
    // standing on another; a failure stays (the job list has it too).
    connect(statusBar(), &QStatusBar::messageChanged, this, [this](const QString& message) {
        if (!message.isEmpty())
            message_tab_ = tabs_->currentIndex();
    });
    connect(tabs_, &QTabWidget::currentChanged, this, [this](int tab) {
        if (tab != message_tab_ && !statusBar()->currentMessage().startsWith("Failed"))
            statusBar()->clearMessage();
    });
    // The Tensor-Train tab says it is computing until its job ends, however it ends.
    const auto tt_ended = [this](int id) {
        if (id == tt_job_)
            tt_->setComputing({});
    };
    connect(&jobs_, &JobController::failed, this, tt_ended);
    connect(&jobs_, &JobController::cancelled, this, tt_ended);

    auto* dock = new QDockWidget("Jobs", this);
    dock->setObjectName("jobs");
    dock->setWidget(job_list_);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    // A few jobs' lines, not the list's 190 px: the tabs keep the height of a 768-px screen
    // (issue 61); the dock's edge drags it taller.
    resizeDocks({dock}, {dock->minimumSizeHint().height()}, Qt::Vertical);
    trackJobs();

    auto* file = menuBar()->addMenu("&File");
    file->addAction("Open model &directory...", QKeySequence::Open, this, &MainWindow::chooseModelDirectory);
    file->addAction("Open model &file (.gguf, .bin)...", this, &MainWindow::chooseModelFile);
    recent_ = file->addMenu("Open &recent");
    file->addSeparator();
    file->addAction("Export &figure (PNG, PDF, SVG)...", QKeySequence("Ctrl+E"), this,
                    &MainWindow::exportFigure);
    file->addAction("Export &data (CSV)...", QKeySequence("Ctrl+D"), this,
                    &MainWindow::exportDataInteractively)
        ->setToolTip("The current tab's plotted values as CSV: a file per panel, named as the axes are");
    file->addAction("Export &results (CSV, JSON)...", QKeySequence("Ctrl+Shift+S"), this,
                    &MainWindow::exportResults);
    export_model_ = file->addAction("Export compressed &model...", QKeySequence("Ctrl+Shift+E"), this,
                                    &MainWindow::chooseExport);
    connect(results_, &views::ResultsView::rowSelected, this, &MainWindow::updateExportEnabled);
    connect(results_->modelFilterBox(), &QComboBox::currentIndexChanged, this,
            &MainWindow::applyResultsYAxis);
    // Row indices above a deleted row move down: so do the rows' records.
    connect(results_, &views::ResultsView::rowRemoved, this, [this](int row) {
        deleted_rows_.push_back({row, result_rows_.take(row), row < saved_rows_});
        if (row < saved_rows_) { // rows are added at the end: the first saved_rows_ were saved
            --saved_rows_;
            deleted_since_save_ = true;
        }
        updateExportEnabled();
    });
    // Undo puts the last deleted row back at its place: its record with it.
    connect(results_, &views::ResultsView::rowRestored, this, [this](int row) {
        DeletedRow deleted = deleted_rows_.isEmpty() ? DeletedRow{} : deleted_rows_.takeLast();
        if (deleted.row == row) {
            result_rows_.insert(row, std::move(deleted.record));
            saved_rows_ += deleted.saved;
        } else {
            result_rows_.insert(row, {}); // not the row deleted last: the others still move up
        }
        updateExportEnabled();
    });
    updateExportEnabled();
    file->addSeparator();
    file->addAction("&Save session (results + settings)...", QKeySequence::Save, this, [this] {
        const QString f = QFileDialog::getSaveFileName(this, "Save session", "session.embedlab.json",
                                                       "EmbedLab session (*.json)");
        if (!f.isEmpty())
            saveSession(f);
    });
    file->addAction("Open s&ession...", this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, "Open session", {}, "EmbedLab session (*.json)");
        if (!f.isEmpty())
            openSession(f);
    });
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
    fillRecentMenu();

    // Edit > Undo: a deleted results row (Ctrl+Z; a focused text field keeps its own).
    auto* edit = menuBar()->addMenu("&Edit");
    undo_ = results_->undoStack()->createUndoAction(this, "&Undo");
    undo_->setObjectName("undo");
    undo_->setShortcuts(QKeySequence::Undo);
    redo_ = results_->undoStack()->createRedoAction(this, "&Redo");
    redo_->setObjectName("redo");
    redo_->setShortcuts(QKeySequence::Redo);
    edit->addAction(undo_);
    edit->addAction(redo_);

    auto* run = menuBar()->addMenu("&Run");
    run->addAction("&Run compression", QKeySequence("Ctrl+R"), method_panel_, &MethodPanel::run);
    run->addAction("&Cancel running job", QKeySequence("Ctrl+."), this,
                   [this] { cancelJob(jobs_.running()); });

    auto* view = menuBar()->addMenu("&View");
    for (int i = 0; i < tabs_->count(); ++i)
        view->addAction(tabs_->tabText(i), QKeySequence(QString("Ctrl+%1").arg(i + 1)), this,
                        [this, i] { tabs_->setCurrentIndex(i); });
    view->addSeparator();
    QAction* jobs_dock = dock->toggleViewAction(); // the Jobs dock can always be reopened
    jobs_dock->setText("&Jobs");
    jobs_dock->setShortcut(QKeySequence("Ctrl+J"));
    view->addAction(jobs_dock);
    view->addAction("&Reset layout", this, [this, dock] {
        removeDockWidget(dock);
        addDockWidget(Qt::BottomDockWidgetArea, dock);
        dock->setFloating(false);
        dock->show();
    });

    auto* help = menuBar()->addMenu("&Help");
    help->addAction("&About EmbedLab", this,
                    [this] { QMessageBox::about(this, "About EmbedLab", aboutText()); });
    help->addAction("&Methods and documentation", this,
                    [] {
                        const QString page = QString::fromStdString(docs_page_path("index.md"));
                        if (!page.isEmpty())
                            QDesktopServices::openUrl(QUrl::fromLocalFile(page));
                    })
        ->setEnabled(!docs_page_path("index.md").empty());
    help->addAction("&Keyboard shortcuts", this,
                    [this] { QMessageBox::information(this, "Keyboard shortcuts", shortcutsText()); });

    qApp->installEventFilter(this); // see eventFilter: shortcuts from any widget
    // A laptop's size, within the screen's work area (issue 61: 780 px did not fit 768).
    QSize size(1366, 700);
    if (const QScreen* screen = QGuiApplication::primaryScreen())
        size = size.boundedTo(screen->availableGeometry().size() - QSize(0, 30)); // the title bar
    resize(size);
    QSettings settings;
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());
}

MainWindow::~MainWindow() = default;

namespace {

// A tab page's frame in its scroll area. QScrollArea scrolls a page whose layout has a
// height-for-width (word-wrapped labels) down to its preferred height, not its minimum:
// the LLE tab scrolled 34 px at 1366x700 with room for all of it. This frame has no
// height-for-width of its own, so the page scrolls only below its minimum size.
class PageFrame : public QWidget {
public:
    PageFrame(QWidget* page, QWidget* parent) : QWidget(parent), page_(page) { page_->setParent(this); }
    QSize sizeHint() const override { return page_->sizeHint(); }
    QSize minimumSizeHint() const override { return page_->minimumSizeHint(); }

protected:
    void resizeEvent(QResizeEvent*) override { page_->setGeometry(rect()); }
    bool event(QEvent* e) override
    {
        if (e->type() == QEvent::LayoutRequest)
            updateGeometry(); // the page's minimum changed (a method's row, a side page)
        return QWidget::event(e);
    }

private:
    QWidget* page_;
};

} // namespace

void MainWindow::addPage(QWidget* page, const QString& name)
{
    auto* scroll = new QScrollArea(this);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidget(new PageFrame(page, scroll));
    tabs_->addTab(scroll, name);
}

QWidget* MainWindow::pageOf(const QWidget* view) const
{
    for (int i = 0; i < tabs_->count(); ++i)
        if (tabs_->widget(i)->isAncestorOf(view))
            return tabs_->widget(i);
    return nullptr;
}

bool MainWindow::showing(const QWidget* view) const
{
    return tabs_->currentWidget() && tabs_->currentWidget() == pageOf(view);
}

QWidget* MainWindow::withControls(QWidget* view, QWidget* controls)
{
    auto* panel = new QWidget(this);
    auto* layout = new QVBoxLayout(panel);
    layout->addWidget(controls);
    layout->addWidget(view, 1);
    return panel;
}

bool MainWindow::showView(const QString& name)
{
    const QHash<QString, QWidget*> views{{"model", chart_},
                                         {"spectrum", spectrum_},
                                         {"allocation", allocation_},
                                         {"results", results_},
                                         {"fourier", fourier_},
                                         {"tt", tt_},
                                         {"lle", lle_},
                                         {"compare", findChild<views::CompareView*>()}};
    if (!views.contains(name))
        return false;
    tabs_->setCurrentWidget(pageOf(views[name]));
    return true;
}

QStringList MainWindow::viewNames()
{
    return {"model", "spectrum", "allocation", "results", "fourier", "tt", "lle", "compare"};
}

MainWindow::TabPlot MainWindow::currentTabPlot() const
{
    // One place says which plot a tab shows; Export figure and Export data both read it.
    const auto of = [](const auto* view) -> TabPlot {
        return {view->plot(), [view] { return view->dataTables(); }};
    };
    if (showing(chart_))
        return of(chart_);
    if (showing(spectrum_))
        return of(spectrum_);
    if (showing(allocation_))
        return of(allocation_);
    if (showing(results_))
        return of(results_);
    if (showing(fourier_))
        return of(fourier_);
    if (showing(tt_))
        return of(tt_);
    if (showing(lle_)) // the graph's own CSV comes first (exportData), then the damage's
        return {lle_->plot(), [this] {
                    QVector<views::DataTable> tables;
                    if (auto* damage = lle_->findChild<views::TokenDamageView*>();
                        damage && !damage->data().runs.isEmpty())
                        tables += damage->dataTables();
                    return tables;
                }};
    return {}; // Compare: text, no plot
}

QCustomPlot* MainWindow::currentPlot() const
{
    return currentTabPlot().plot;
}

QVector<views::DataTable> MainWindow::currentDataTables() const
{
    const TabPlot current = currentTabPlot();
    return current.tables ? current.tables() : QVector<views::DataTable>{};
}

QString MainWindow::nothingToExport() const
{
    const QString tab = "The " + tabs_->tabText(tabs_->currentIndex()) + " tab";
    if (!currentPlot())
        return tab + " has no figure to export";
    const auto tables = currentDataTables();
    const bool empty =
        std::all_of(tables.begin(), tables.end(), [](const auto& t) { return t.rows.isEmpty(); });
    if (showing(lle_) ? lle_->data().x.isEmpty() : empty)
        return tab + " has nothing to export yet: its plot is empty";
    return {};
}

QString MainWindow::proposedExportFile(const QString& suffix) const
{
    const QString folder = QSettings().value("export/folder", QDir::homePath()).toString();
    QString name = tabs_->tabText(tabs_->currentIndex()).toLower().replace(' ', '-');
    if (!model_path_.isEmpty()) {
        const QFileInfo model(model_path_);
        name.prepend((model.isDir() ? model.fileName() : model.completeBaseName()) + "-");
    }
    return QDir(folder).filePath(name + "." + suffix);
}

namespace {
void remember_export_folder(const QString& file)
{
    QSettings().setValue("export/folder", QFileInfo(file).absolutePath());
}
} // namespace

void MainWindow::exportFigure()
{
    // Another tab's empty plot is still a figure (its axes and what it says); the Results
    // plot without a point is not: said before any dialog, as Export data does.
    if (!currentPlot() || (showing(results_) && !nothingToExport().isEmpty())) {
        statusBar()->showMessage(nothingToExport());
        return;
    }
    views::FigureExportDialog dialog(this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    const QString file = QFileDialog::getSaveFileName(this, "Export figure", proposedExportFile("pdf"),
                                                      "PDF (*.pdf);;SVG (*.svg);;PNG (*.png)");
    if (file.isEmpty())
        return;
    remember_export_folder(file);
    const QString error = views::exportFigure(currentPlot(), file, dialog.options());
    statusBar()->showMessage(error.isEmpty() ? "Wrote " + file : error);
}

QString MainWindow::exportData(const QString& file, QStringList* written)
{
    if (written)
        written->clear();
    QVector<views::DataTable> tables = currentDataTables();
    QStringList files;
    if (showing(lle_)) {
        if (lle_->data().x.isEmpty())
            return file + ": the neighbour graph has not been computed yet";
        if (const QString error = lle_->exportCoordinatesCsv(file); !error.isEmpty())
            return error;
        files << file;
        // The damage table beside it, named as a further table would be.
        tables.prepend(views::DataTable{"coordinates", {}, {}});
        for (int i = 1; i < tables.size(); ++i) {
            const QString path = views::dataTableFile(file, tables, i);
            QStringList one;
            if (const QString error = views::writeDataTables({tables[i]}, path, &one); !error.isEmpty())
                return error;
            files += one;
        }
    } else {
        if (tables.isEmpty())
            return file + ": the " + tabs_->tabText(tabs_->currentIndex()) + " tab has no plot to export";
        if (const QString error = views::writeDataTables(tables, file, &files); !error.isEmpty())
            return error;
    }
    if (written)
        *written = files;
    return {};
}

void MainWindow::exportDataInteractively()
{
    if (const QString nothing = nothingToExport(); !nothing.isEmpty()) {
        statusBar()->showMessage(nothing);
        return;
    }
    const QString file =
        QFileDialog::getSaveFileName(this, "Export data", proposedExportFile("csv"), "CSV (*.csv)");
    if (file.isEmpty())
        return;
    remember_export_folder(file);
    QStringList files;
    const QString error = exportData(file, &files);
    statusBar()->showMessage(error.isEmpty() ? "Wrote " + files.join(", ") : error);
}

namespace {

// JSON between the engine's (nlohmann) and Qt's documents.
QJsonObject qt_object(const nlohmann::ordered_json& j)
{
    return QJsonDocument::fromJson(QByteArray::fromStdString(j.dump())).object();
}
nlohmann::ordered_json engine_json(const QJsonObject& o)
{
    return nlohmann::ordered_json::parse(QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString());
}

} // namespace

namespace {

// A session's row number key ("3"), checked against its rows; InputError naming it else.
int session_row(const QString& key, int rows, const char* member)
{
    bool ok = false;
    const int row = key.toInt(&ok);
    if (!ok || row < 0 || row >= rows)
        throw InputError(std::string(member) + ": '" + key.toStdString() + "' is not a row of its " +
                         std::to_string(rows) + " results rows");
    return row;
}

// A session's "row_requests" and "row_chains" (saveSession's, by row), checked, as the rows'
// records; InputError naming a row or field that is not one. Sessions before them have none.
ResultRows session_result_rows(const QJsonObject& session, int rows)
{
    ResultRows records;
    const QJsonObject requests = session.value("row_requests").toObject();
    for (auto it = requests.begin(); it != requests.end(); ++it)
        records.at(session_row(it.key(), rows, "row_requests")).request =
            stored_request_from_json(engine_json(it.value().toObject()));
    const QJsonObject chains = session.value("row_chains").toObject();
    for (auto it = chains.begin(); it != chains.end(); ++it) // the engine's own form (Qt sorts keys)
        records.at(session_row(it.key(), rows, "row_chains")).chain =
            pipeline_json(pipeline_from_json(engine_json(it.value().toObject())));
    return records;
}

} // namespace

bool MainWindow::saveSession(const QString& file)
{
    try {
        const auto results =
            QJsonDocument::fromJson(QByteArray::fromStdString(results_json(results_->rows())));
        // The panel's registry method: trim, a chain's first step, has no request of its own.
        QString method = method_panel_->method();
        if (!find_method(method.toStdString()))
            method = find_method(method_panel_->thenMethod().toStdString()) ? method_panel_->thenMethod()
                                                                            : MethodPanel::methods().front();
        CompressionRequest request = method_panel_->request(method);
        request.model = model_path_.toStdString();
        QJsonObject encoders; // model -> "masked_lm" or "encoder": its rows' y axis and PPL notes
        for (auto it = encoder_models_.cbegin(); it != encoder_models_.cend(); ++it)
            encoders[it.key()] = it.value() ? "masked_lm" : "encoder";
        QJsonObject session{{"format", "embedlab-session"},
                            {"version", 2},
                            {"model", model_path_},
                            {"request", qt_object(request_json(request))},
                            {"target", qt_object(target_json(method_panel_->target()))},
                            {"pareto_y", results_->yMetric()},
                            {"encoders", encoders},
                            {"pareto_y_scale", results_->ySymlog() ? "symlog" : "linear"},
                            {"results", results.object()}};
        if (!y_before_encoders_.isEmpty()) // the axis the encoders' cosine replaced, back for other rows
            session["pareto_y_before_encoders"] = y_before_encoders_;
        // The rows' requests and chains, by row: Copy as command etc. work after reopening.
        QJsonObject requests, chains;
        for (int row = 0; row < result_rows_.size(); ++row) {
            const ResultRow& record = *result_rows_.find(row);
            if (record.request)
                requests[QString::number(row)] = qt_object(request_json(*record.request));
            if (record.chain)
                chains[QString::number(row)] = qt_object(*record.chain);
        }
        session["row_requests"] = requests;
        session["row_chains"] = chains;
        if (const auto chain = method_panel_->chainJson()) // the chain the panel built
            session["chain"] = qt_object(*chain);
        write_file(file.toStdString(), QJsonDocument(session).toJson().toStdString());
    } catch (const std::exception& e) {
        statusBar()->showMessage(QString::fromStdString(e.what()));
        return false;
    }
    saved_rows_ = static_cast<int>(results_->rows().size());
    deleted_since_save_ = false;
    statusBar()->showMessage("Saved the session to " + file);
    return true;
}

bool MainWindow::openSession(const QString& file)
{
    QFile in(file);
    QJsonParseError error{};
    const auto doc =
        in.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(in.readAll(), &error) : QJsonDocument();
    const QJsonObject session = doc.object();
    if (session.value("format").toString() != "embedlab-session") {
        statusBar()->showMessage(file + ": not an EmbedLab session file");
        return false;
    }
    // Version 2: "request" (request_json) and "target"; version 1 (until issue 37):
    // the panel's fields under "method", every method's at once.
    const bool legacy = !session.contains("request") && session.value("method").isObject();
    std::optional<CompressionRequest> request;
    RunTarget target;
    try {
        const auto rows =
            results_from_json(QJsonDocument(session.value("results").toObject()).toJson().toStdString());
        if (!legacy) {
            request = stored_request_from_json(engine_json(session.value("request").toObject()));
            target = target_from_json(engine_json(session.value("target").toObject()));
        }
        ResultRows reopened = session_result_rows(session, static_cast<int>(rows.size()));
        results_->clear();
        deleted_rows_.clear(); // with the results view's undo stack
        // A reopened row's numbers stay; its model is not in memory (no source).
        result_rows_.clear();
        // Issue 61 item 6: a reopened encoder's rows are drawn and explained as this session's.
        const QJsonObject encoders = session.value("encoders").toObject();
        for (auto it = encoders.begin(); it != encoders.end(); ++it) {
            const bool masked_lm = it.value().toString() == "masked_lm";
            encoder_models_[it.key()] = masked_lm;
            results_->setPerplexityNote(it.key(), encoderNote(it.key(), masked_lm));
        }
        for (const auto& r : rows)
            results_->addRow(r);
        result_rows_ = std::move(reopened);
    } catch (const std::exception& e) {
        statusBar()->showMessage(file + ": " + QString::fromStdString(e.what()));
        return false;
    }
    if (legacy) {
        method_panel_->setLegacyChoice(session.value("method").toObject().toVariantMap());
    } else {
        method_panel_->setRequest(*request);
        method_panel_->setTarget(target);
        if (session.contains("chain")) {
            try {
                method_panel_->setChain(engine_json(session.value("chain").toObject()));
            } catch (const std::exception& e) {
                statusBar()->showMessage(file + ": chain: " + QString::fromStdString(e.what()));
                return false;
            }
        }
    }
    // Sessions before issue 41 have no y axis: the plot keeps its own.
    if (session.contains("pareto_y"))
        results_->setYAxis(session.value("pareto_y").toString(),
                           session.value("pareto_y_scale").toString() == "symlog");
    y_before_encoders_ = session.value("pareto_y_before_encoders").toString();
    y_symlog_before_encoders_ = false;
    applyResultsYAxis(); // the reopened rows' own rule
    saved_rows_ = static_cast<int>(results_->rows().size());
    deleted_since_save_ = false;
    if (const QString model = session.value("model").toString(); !model.isEmpty() && model != model_path_)
        openModel(model);
    statusBar()->showMessage("Opened the session " + file);
    return true;
}

QString MainWindow::unsavedText() const
{
    const int added = static_cast<int>(results_->rows().size()) - saved_rows_;
    if (added > 0)
        return added == 1 ? QString("1 results row is not saved.")
                          : QString("%1 results rows are not saved.").arg(added);
    return deleted_since_save_ ? QString("Results rows were deleted since the last save.") : QString();
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (const QString unsaved = unsavedText(); ask_before_discarding_ && !unsaved.isEmpty()) {
        const auto answer = QMessageBox::question(
            this, "Unsaved results", unsaved + " Save the session first?",
            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
        if (answer == QMessageBox::Cancel) {
            event->ignore();
            return;
        }
        if (answer == QMessageBox::Save) {
            const QString file = QFileDialog::getSaveFileName(this, "Save session", "session.embedlab.json",
                                                              "EmbedLab session (*.json)");
            if (file.isEmpty() || !saveSession(file)) {
                event->ignore();
                return;
            }
        }
    }
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    QMainWindow::closeEvent(event);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event)
{
    // A focused field claims keys such as Ctrl+E (end of line under X11's key
    // bindings) before the shortcut map sees them: refuse the claim for the keys
    // of this window's actions, so they work from any widget.
    if (event->type() == QEvent::ShortcutOverride) {
        auto* widget = qobject_cast<QWidget*>(watched);
        const auto* key = static_cast<QKeyEvent*>(event);
        if (widget && widget->window() == this && (key->modifiers() & Qt::ControlModifier)) {
            const QKeySequence pressed(key->keyCombination());
            for (QAction* menu : menuBar()->actions())
                for (QAction* a : menu->menu()->actions())
                    if (a != undo_ && a != redo_ && a->isEnabled() && a->shortcuts().contains(pressed)) {
                        event->ignore();
                        return true;
                    }
        }
    }
    return QMainWindow::eventFilter(watched, event);
}

void MainWindow::rememberModel(const QString& path)
{
    QSettings settings;
    QStringList recent = settings.value("models/recent").toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    while (recent.size() > kRecentModels)
        recent.removeLast();
    settings.setValue("models/recent", recent);
    fillRecentMenu();
}

void MainWindow::fillRecentMenu()
{
    recent_->clear();
    const QStringList recent = QSettings().value("models/recent").toStringList();
    for (const QString& path : recent)
        recent_->addAction(path, this, [this, path] { openModel(path); });
    recent_->setEnabled(!recent.isEmpty());
}

void MainWindow::exportResults()
{
    QString selected;
    const QString file = QFileDialog::getSaveFileName(this, "Export results", "results.csv",
                                                      "CSV (*.csv);;JSON (*.json)", &selected);
    if (file.isEmpty())
        return;
    const bool json = file.endsWith(".json", Qt::CaseInsensitive) || selected.startsWith("JSON");
    try {
        write_file(file.toStdString(), json ? results_json(results_->rows()) : results_csv(results_->rows()));
        saved_rows_ = static_cast<int>(results_->rows().size());
        deleted_since_save_ = false;
        statusBar()->showMessage("Wrote " + file);
    } catch (const std::exception& e) {
        statusBar()->showMessage(QString::fromStdString(e.what()));
    }
}

namespace {

// A request field's JSON value as a Python literal (JSON's strings and numbers are
// Python's; true, false and null are not).
std::string python_literal(const nlohmann::ordered_json& v)
{
    if (v.is_boolean())
        return v.get<bool>() ? "True" : "False";
    if (v.is_null())
        return "None";
    if (v.is_array()) {
        std::string text = "[";
        for (const auto& e : v)
            text += (text.size() > 1 ? ", " : "") + python_literal(e);
        return text + "]";
    }
    if (v.is_object()) { // a chain's step
        std::string text = "{";
        for (const auto& [key, value] : v.items())
            text += (text.size() > 1 ? ", " : "") + nlohmann::ordered_json(key).dump() + ": " +
                    python_literal(value);
        return text + "}";
    }
    return v.dump(); // a string (JSON's escapes are Python's) or a number
}

// A folder name from a run's words: letters, digits, '.' and '_', the rest one '-'.
std::string folder_name(const std::string& name);

// A chain's row (its pipeline request) as the CLI's line: compress --method trim and trim's
// fields as flags, --then METHOD and the method's flags as compress_command writes them
// (a flag trim already gave, the shared --freq-text, once), --then-store its store.
std::string chain_command(const nlohmann::ordered_json& pipeline, const std::string& out)
{
    const PipelineRequest p = pipeline_from_json(pipeline);
    if (!p.trim)
        return cli::shell_command_line(cli::compress_command(p.request, out));
    std::vector<std::string> argv{"embedlab-cli", "compress", p.request.model, "--method", "trim"};
    for (const auto& [key, value] : p.steps[0].items()) {
        if (key == "method")
            continue;
        std::string flag = "--" + key;
        std::replace(flag.begin(), flag.end(), '_', '-');
        argv.push_back(flag);
        argv.push_back(value.is_string() ? value.get<std::string>() : value.dump());
    }
    std::vector<std::string> omitted;
    if (p.request.method.empty()) { // trim alone: its evaluation text and window
        if (!p.request.eval_text.empty())
            argv.insert(argv.end(), {"--eval-text", p.request.eval_text});
        if (p.request.ctx > 0)
            argv.insert(argv.end(), {"--ctx", std::to_string(p.request.ctx)});
    } else {
        CompressionRequest method = p.request;
        method.store.clear(); // --then-store
        const std::vector<std::string> words = cli::compress_command(method, out, &omitted);
        argv.insert(argv.end(), {"--then", p.request.method});
        for (size_t i = 5; i + 2 < words.size(); ++i) { // past "--method M", before "--out OUT"
            const bool valued = i + 1 < words.size() - 2 && words[i + 1].rfind("--", 0) != 0;
            const auto given = std::search(argv.begin(), argv.end(), words.begin() + static_cast<long>(i),
                                           words.begin() + static_cast<long>(i + (valued ? 2 : 1)));
            if (given == argv.end())
                argv.insert(argv.end(), words.begin() + static_cast<long>(i),
                            words.begin() + static_cast<long>(i + (valued ? 2 : 1)));
            i += valued ? 1 : 0;
        }
        if (!p.request.store.empty())
            argv.insert(argv.end(), {"--then-store", p.request.store});
    }
    argv.insert(argv.end(), {"--out", out});
    std::string line = cli::shell_command_line(argv);
    for (size_t i = 0; i < omitted.size(); ++i)
        line += (i == 0 ? "  # not settable by a compress flag: " : ", ") + omitted[i];
    return line;
}

// A chain's row as a compress_chain call: its steps, and its top fields as keywords.
std::string chain_python(const nlohmann::ordered_json& pipeline)
{
    std::string call = "import embedlab\nchain = embedlab.compress_chain(" +
                       nlohmann::ordered_json(pipeline.value("model", "")).dump() + ", " +
                       python_literal(pipeline["pipeline"]);
    for (const auto& [field, value] : pipeline.items())
        if (field != "model" && field != "pipeline")
            call += ", " + field + "=" + python_literal(value);
    return call + ")\nprint(chain.summary)\n";
}

// Where a copied row writes its model: named by the model and the run's settings
// ("tinyllama-pca-rank-32"), so two rows' pasted commands do not collide.
std::string row_output_dir(const CompressionRequest& request)
{
    return folder_name(std::filesystem::path(request.model).filename().string() + "-" +
                       describe_request(request));
}

// ... and a chain's row: by the model and the chain's steps ("tinyllama-trim-0.9-pca-rank-16-q8_0").
std::string chain_output_dir(const nlohmann::ordered_json& pipeline)
{
    return folder_name(std::filesystem::path(pipeline.value("model", "")).filename().string() + "-" +
                       pipeline_label(pipeline_from_json(pipeline)));
}

std::string folder_name(const std::string& name)
{
    std::string out;
    for (char c : name) {
        const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
        if (plain)
            out += c;
        else if (!out.empty() && out.back() != '-')
            out += '-';
    }
    while (!out.empty() && (out.back() == '-' || out.back() == '.'))
        out.pop_back();
    return out;
}

} // namespace

QString MainWindow::rowText(int row, RowText as) const
{
    const ResultRow* record = result_rows_.find(row);
    if (!record)
        return {};
    if (record->chain) {
        const nlohmann::ordered_json& pipeline = *record->chain;
        const std::string out = chain_output_dir(pipeline);
        switch (as) {
        case RowText::Command:
            return QString::fromStdString(chain_command(pipeline, out));
        case RowText::JsonRequest: { // the pipeline job embedlab-cli worker --job runs
            nlohmann::ordered_json job = {{"kind", "compress"}, {"out", out}};
            job.update(pipeline);
            return QString::fromStdString(job.dump(2)) + "\n";
        }
        case RowText::Python:
            return QString::fromStdString(chain_python(pipeline));
        }
    }
    if (!record->request)
        return {};
    const CompressionRequest& request = *record->request;
    const auto json = request_json(request);
    switch (as) {
    case RowText::Command: {
        const std::string out = row_output_dir(request);
        std::vector<std::string> omitted;
        std::string line = cli::shell_command_line(cli::compress_command(request, out, &omitted));
        // Fields compress has no flag for (the panel's eval_tokens): said, as a comment sh skips.
        for (size_t i = 0; i < omitted.size(); ++i)
            line += (i == 0 ? "  # not settable by a compress flag: " : ", ") + omitted[i] + " " +
                    json[omitted[i]].dump();
        return QString::fromStdString(line);
    }
    case RowText::JsonRequest: { // a compress job embedlab-cli worker --job runs as it is
        nlohmann::ordered_json job = {{"kind", "compress"}, {"out", row_output_dir(request)}};
        job.update(json);
        return QString::fromStdString(job.dump(2)) + "\n";
    }
    case RowText::Python: {
        std::string call = "import embedlab\nrun = embedlab.compress(" +
                           nlohmann::ordered_json(request.model).dump() + ", " +
                           nlohmann::ordered_json(request.method).dump();
        for (const auto& [field, value] : json.items())
            if (field != "model" && field != "method")
                call += ", " + field + "=" + python_literal(value);
        return QString::fromStdString(call + ")\nprint(run.summary)\n");
    }
    }
    return {};
}

void MainWindow::updateExportEnabled()
{
    const ResultRow* record = result_rows_.find(results_->selectedRow());
    const bool can = record && record->exportable();
    export_model_->setEnabled(can);
    export_button_->setEnabled(can);
}

void MainWindow::chooseExport()
{
    const int row = results_->selectedRow();
    const ResultRow* record = result_rows_.find(row);
    if (!record || !record->exportable()) {
        statusBar()->showMessage("Select a finished compression row to export");
        return;
    }
    const auto& r = results_->rows()[row];
    QSettings settings;
    const QString parent = settings.value("export/parent", QDir::homePath()).toString();
    // Named by the run's settings as the method describes them (the registry's describe:
    // "pca rank 16", "tt shape 4x4x8, eps 0.3"), as a copied command's --out; a chain by its steps.
    QString name;
    if (record->source) {
        CompressionRequest named = record->source->request;
        named.model = QFileInfo(record->source->model).completeBaseName().toStdString();
        name = QString::fromStdString(row_output_dir(named));
    } else {
        name = QString::fromStdString(chain_output_dir(*record->chain));
    }
    const QString how = record->source ? "written from the run kept in memory (or run again: every method is "
                                         "seeded) like <tt>embedlab-cli compress</tt>."
                                       : "its steps run again (every step is seeded) and written like "
                                         "<tt>embedlab-cli compress ... --then</tt>.";

    QDialog dialog(this);
    dialog.setWindowTitle("Export compressed model");
    auto* where = new QLineEdit(QDir(parent).filePath(name), &dialog);
    auto* browse = new QPushButton("Browse...", &dialog);
    connect(browse, &QPushButton::clicked, &dialog, [&] {
        const QString dir = QFileDialog::getExistingDirectory(&dialog, "Directory to write the model into",
                                                              QFileInfo(where->text()).absolutePath());
        if (!dir.isEmpty())
            where->setText(QDir(dir).filePath(QFileInfo(where->text()).fileName()));
    });
    auto* factorised = new QRadioButton("factorised (the method's factors; EmbedLab loads them)", &dialog);
    auto* dense = new QRadioButton("factorised + dense/ (the rebuilt table; any Hugging Face tool)", &dialog);
    factorised->setChecked(true);
    auto* location = new QHBoxLayout;
    location->addWidget(where, 1);
    location->addWidget(browse);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &dialog);
    connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    auto* form = new QFormLayout(&dialog);
    form->addRow(new QLabel(
        QString("%1, %2: %3")
            .arg(QString::fromStdString(r.method), QString::fromStdString(r.parameters).toHtmlEscaped(), how),
        &dialog));
    form->addRow("Output directory", location);
    form->addRow("Contents", factorised);
    form->addRow("", dense);
    form->addRow(buttons);
    if (dialog.exec() != QDialog::Accepted || where->text().trimmed().isEmpty())
        return;
    const QString dir = QDir::cleanPath(where->text().trimmed());
    bool overwrite = false;
    if (QFileInfo::exists(dir)) {
        if (QMessageBox::question(this, "Export compressed model",
                                  dir +
                                      " already exists. Replace it once the new model is complete? (Only an "
                                      "EmbedLab model directory is replaced.)") != QMessageBox::Yes)
            return;
        overwrite = true;
    }
    settings.setValue("export/parent", QFileInfo(dir).absolutePath());
    exportCompressed(row, dir, dense->isChecked(), overwrite);
}

QString MainWindow::droppedModel(const QMimeData* data)
{
    if (!data || !data->hasUrls())
        return {};
    for (const QUrl& url : data->urls()) {
        if (!url.isLocalFile())
            continue;
        const QFileInfo info(url.toLocalFile());
        const QString suffix = info.suffix().toLower();
        if (info.isDir() || (info.isFile() && (suffix == "gguf" || suffix == "bin")))
            return info.absoluteFilePath();
    }
    return {};
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (!droppedModel(event->mimeData()).isEmpty())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    const QString path = droppedModel(event->mimeData());
    if (path.isEmpty())
        return;
    event->acceptProposedAction();
    openModel(path);
}

void MainWindow::trackJobs()
{
    // The list follows the jobs itself (jobs_dock.cpp); a failure is also said here.
    connect(&jobs_, &JobController::failed, this, [this](int id, const QString& message) {
        statusBar()->showMessage("Failed: " + message);
        if (load_jobs_.contains(id)) {
            const QString still = model_path_.isEmpty() ? QString("No model is loaded.")
                                                        : "Still loaded: " + model_path_.toHtmlEscaped();
            facts_->setText("<font color='#b00'><b>Could not load " + load_jobs_[id].toHtmlEscaped() +
                            "</b><br>" + message.toHtmlEscaped() + "</font><br>" + still + "<br><br>" +
                            facts_html_);
            emit modelShown(false);
        }
    });
}

void MainWindow::cancelJob(int id)
{
    if (id <= 0)
        return;
    if (jobs_.running() == id) // said at once; the engine stops at its next report
        job_list_->setCancelling(id);
    jobs_.cancel(id);
}

QString MainWindow::aboutText() const
{
    QString text = "<b>EmbedLab</b>: compress the token embeddings and attention values of small language "
                   "models, and see what each method keeps.<br>" +
                   QString::fromStdString(library_versions()).toHtmlEscaped() + ", Qt " + qVersion() +
                   ".<br>";
    text += model_path_.isEmpty() ? QString("No model loaded.") : "<br>Loaded model:<br>" + facts_html_;
    return text;
}

QString MainWindow::shortcutsText() const
{
    QStringList lines;
    for (QAction* menu : menuBar()->actions())
        for (QAction* a : menu->menu()->actions())
            if (!a->shortcut().isEmpty())
                lines << a->shortcut().toString(QKeySequence::NativeText) + "\t" + a->text().remove('&');
    return lines.join("\n");
}

void MainWindow::showJobStatus(int id, const QString& status)
{
    if (id == jobs_.running())
        job_list_->setStatus(id, status);
}

void MainWindow::openModel(const QString& path)
{
    statusBar()->showMessage("Loading " + path + " ...");
    const int id = jobs_.submit("load " + path, [this, path](const ProgressFn&) -> std::function<void()> {
        auto summary = summarize_model(path.toStdString());
        // A model that does not load fails the job (red in the job list, its
        // message in the status bar); the loaded model stays, named in the title.
        if (!summary.error.empty())
            throw InputError(summary.error);
        return [this, summary, path] {
            resetViews();
            showSummary(summary);
            model_path_ = path;
            model_dim_ = summary.hidden_size;
            model_encoder_ = summary.encoder;
            model_masked_lm_ = summary.masked_lm;
            if (model_encoder_) {
                encoder_models_[path] = summary.masked_lm;
                results_->setPerplexityNote(path, encoderNote(path, summary.masked_lm));
            }
            method_panel_->setEvaluation(!summary.encoder    ? MethodPanel::Evaluation::Perplexity
                                         : summary.masked_lm ? MethodPanel::Evaluation::PseudoPerplexity
                                                             : MethodPanel::Evaluation::None,
                                         QFileInfo(path).fileName());
            followModelInResults();
            if (auto* damage = findChild<DamagePanel*>())
                damage->setModel(path); // its plot and colour-by were the previous model's
            if (auto* compare = findChild<views::CompareView*>())
                compare->setLoadedModel(QFileInfo(path).fileName(), summary.encoder);
            model_vocab_ = summary.vocab_size;
            method_panel_->setDimension(static_cast<int>(summary.hidden_size));
            // Controls clamp to the new model's ranges.
            const int vocab = static_cast<int>(std::max<int64_t>(summary.vocab_size, 2));
            fourier_first_->setMaximum(vocab - 2);
            fourier_count_->setMaximum(std::min(4096, vocab));
            // The first ids that fit, not the old model's start clamped to the last two.
            fourier_first_->setValue(0);
            fourier_count_->setValue(std::min(256, vocab));
            lle_k_->setMaximum(static_cast<int>(std::clamp<int64_t>(summary.hidden_size, 1, 64)));
            setWindowTitle(QFileInfo(path).fileName() + " - EmbedLab");
            rememberModel(path);
            analyse(path);
            computeShownView();
            // A method's default from the table (tt's eps) is chosen when it is the
            // panel's method (seconds of fits: not for every method on every load).
            chooseTableDefault(path);
        };
    });
    load_jobs_[id] = path;
}

void MainWindow::resetViews()
{
    lazy_started_.clear();
    head_overlays_.clear();  // the new model's arrive with its importance job
    model_overlays_.clear(); // compared with the previous model
    fourier_dir_.clear();
    // Only views holding something are redrawn: each setData replots at once, and
    // the first load (nothing shown yet) should cost the GUI thread nothing here.
    if (!spectrum_->data().eigenvalues.isEmpty()) {
        spectrum_->setData({});
        applySpectrumOverlays();
    }
    if (!allocation_->data().normalised.isEmpty())
        allocation_->setData({});
    if (!fourier_->data().matrices.isEmpty())
        fourier_->setData({});
    if (!tt_->data().candidates.isEmpty())
        tt_->setData({});
    if (!lle_->data().x.isEmpty())
        lle_->setData({});
    if (!chart_->data().bars.isEmpty())
        chart_->setData({});
}

void MainWindow::clearRefusal()
{
    if (statusBar()->currentMessage().startsWith("Not run"))
        statusBar()->clearMessage();
}

void MainWindow::followModelInResults()
{
    bool has_rows = false;
    for (const auto& r : results_->rows())
        has_rows = has_rows || QString::fromStdString(r.model) == model_path_;
    // No row yet: every model's; its first row switches the filter to it (ResultsView::addRow).
    results_->setModelFilter(has_rows ? model_path_ : QString());
    applyResultsYAxis();
}

void MainWindow::applyResultsYAxis()
{
    // An encoder without a masked-LM head has no perplexity: its rows are drawn by what
    // every encoder run has, but only while no row shown has a perplexity (a masked-LM
    // encoder's rows have their pseudo-perplexity's Δ ln PPL, as a decoder's have theirs).
    const QString filter = results_->modelFilter();
    bool any = false, cosine_only = true;
    for (const auto& r : results_->rows()) {
        const QString model = QString::fromStdString(r.model);
        if (!filter.isEmpty() && model != filter)
            continue;
        any = true;
        const bool perplexity = std::isfinite(r.ppl) && std::isfinite(r.delta_ln_ppl) && r.ppl > 0;
        cosine_only = cosine_only && encoder_models_.contains(model) && !perplexity;
    }
    if (!any)
        cosine_only = model_encoder_ && !model_masked_lm_;
    const QString cosine = "1 − mean cosine";
    if (cosine_only && results_->yMetric() != cosine) {
        y_before_encoders_ = results_->yMetric();
        y_symlog_before_encoders_ = results_->ySymlog();
        results_->setYAxis(cosine, false);
    } else if (!cosine_only && results_->yMetric() == cosine && !y_before_encoders_.isEmpty()) {
        results_->setYAxis(std::exchange(y_before_encoders_, {}), y_symlog_before_encoders_);
    }
}

void MainWindow::chooseModelDirectory()
{
    const QString dir = QFileDialog::getExistingDirectory(this, "Open a Hugging Face model directory");
    if (!dir.isEmpty())
        openModel(dir);
}

void MainWindow::chooseModelFile()
{
    const QString f =
        QFileDialog::getOpenFileName(this, "Open a model file", {}, "Models (*.gguf *.bin);;All files (*)");
    if (!f.isEmpty())
        openModel(f);
}

void MainWindow::showSummary(const ModelSummary& s)
{
    auto num = [](int64_t n) { return QLocale().toString(static_cast<qlonglong>(n)); };
    QString html = QString("<b>%1</b><br>%2 (%3), stored %4, tokenizer %5<br>"
                           "vocabulary %6, d = %7, %8 layers, %9 heads (%10 KV), %11 head<br>"
                           "%12 parameters")
                       .arg(QString::fromStdString(s.path).toHtmlEscaped(),
                            QString::fromStdString(s.architecture), QString::fromStdString(s.format),
                            QString::fromStdString(s.dtype), QString::fromStdString(s.tokenizer),
                            num(s.vocab_size), num(s.hidden_size), num(s.layers), num(s.heads))
                       .arg(num(s.kv_heads),
                            // An encoder's token head is its masked-LM head (tied), else it has none.
                            s.encoder ? (s.tied ? "masked-LM (tied)" : "no token")
                            : s.tied  ? "tied"
                                      : "untied",
                            num(s.total_parameters));
    QStringList facts;
    for (const auto& f : s.facts)
        facts << QString::fromStdString(f).toHtmlEscaped();
    html += "<br>" + facts.join("; ");
    for (const auto& n : s.not_applicable)
        html += "<br>does not apply: " + QString::fromStdString(n).toHtmlEscaped();
    for (const auto& w : s.warnings)
        html += "<br><font color='#b00'>warning: " + QString::fromStdString(w).toHtmlEscaped() + "</font>";
    facts_html_ = html;
    facts_->setText(html);

    views::ParameterBreakdownData data;
    for (const auto& [part, count] : s.parameters)
        data.bars.push_back({QString::fromStdString(part), static_cast<double>(count)});
    data.highlighted = 0; // the token embedding
    chart_->setData(data);
    statusBar()->showMessage("Loaded " + QString::fromStdString(s.path));
    emit modelShown(true);
}

} // namespace embedlab::app
