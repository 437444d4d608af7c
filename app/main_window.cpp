#include "main_window.hpp"

#include <QDockWidget>
#include <QFileDialog>
#include <QHeaderView>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "analyses.hpp"
#include "parameter_breakdown_chart.hpp"
#include "rank_allocation_view.hpp"
#include "spectrum_view.hpp"

namespace embedlab::app {

namespace {
enum JobColumn { kName, kState, kProgress, kTime, kCancel };
}

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), tabs_(new QTabWidget(this)), facts_(new QLabel(this)),
      chart_(new views::ParameterBreakdownChart(this)), spectrum_(new views::SpectrumView(this)),
      allocation_(new views::RankAllocationView(this)), job_list_(new QTreeWidget(this))
{
    setWindowTitle("EmbedLab");
    auto* model_panel = new QWidget(this);
    auto* layout = new QVBoxLayout(model_panel);
    facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    facts_->setWordWrap(true);
    layout->addWidget(facts_);
    layout->addWidget(chart_, 1);
    tabs_->addTab(model_panel, "Model");
    tabs_->addTab(spectrum_, "Spectrum");
    tabs_->addTab(allocation_, "IPRS allocation");
    setCentralWidget(tabs_);

    job_list_->setHeaderLabels({"Job", "State", "Progress", "Time", ""});
    job_list_->setRootIsDecorated(false);
    job_list_->header()->setSectionResizeMode(kName, QHeaderView::Stretch);
    auto* dock = new QDockWidget("Jobs", this);
    dock->setObjectName("jobs");
    dock->setWidget(job_list_);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    trackJobs();

    auto* file = menuBar()->addMenu("&File");
    file->addAction("Open model &directory...", QKeySequence::Open, this, &MainWindow::chooseModelDirectory);
    file->addAction("Open model &file (.gguf, .bin)...", this, &MainWindow::chooseModelFile);
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
    resize(1000, 720);
}

bool MainWindow::showView(const QString& name)
{
    const QHash<QString, QWidget*> views{
        {"model", tabs_->widget(0)}, {"spectrum", spectrum_}, {"allocation", allocation_}};
    if (!views.contains(name))
        return false;
    tabs_->setCurrentWidget(views[name]);
    return true;
}

void MainWindow::trackJobs()
{
    auto state = [this](int id, const QString& text) {
        if (auto* item = job_items_.value(id)) {
            item->setText(kState, text);
            if (job_clocks_.contains(id))
                item->setText(kTime, QString::number(job_clocks_[id].elapsed() / 1000.0, 'f', 1) + " s");
            if (text != "running" && text != "queued")
                job_list_->setItemWidget(item, kCancel, nullptr);
        }
    };
    connect(&jobs_, &JobController::queued, this, [this](int id, const QString& name) {
        auto* item = new QTreeWidgetItem(job_list_, {name, "queued", "", "", ""});
        job_items_[id] = item;
        auto* bar = new QProgressBar(job_list_);
        bar->setRange(0, 1000);
        bar->setValue(0);
        job_list_->setItemWidget(item, kProgress, bar);
        auto* cancel = new QPushButton("Cancel", job_list_);
        connect(cancel, &QPushButton::clicked, this, [this, id] { jobs_.cancel(id); });
        job_list_->setItemWidget(item, kCancel, cancel);
        job_list_->scrollToItem(item);
    });
    connect(&jobs_, &JobController::started, this, [this, state](int id) {
        job_clocks_[id].start();
        state(id, "running");
    });
    connect(&jobs_, &JobController::progress, this, [this, state](int id, qint64 done, qint64 total) {
        if (auto* item = job_items_.value(id))
            if (auto* bar = qobject_cast<QProgressBar*>(job_list_->itemWidget(item, kProgress)))
                bar->setValue(total > 0 ? static_cast<int>(1000 * done / total) : 0);
        state(id, "running");
    });
    connect(&jobs_, &JobController::finished, this, [this, state](int id, double) {
        if (auto* item = job_items_.value(id))
            if (auto* bar = qobject_cast<QProgressBar*>(job_list_->itemWidget(item, kProgress)))
                bar->setValue(1000);
        state(id, "done");
    });
    connect(&jobs_, &JobController::failed, this, [this, state](int id, const QString& message) {
        state(id, "failed");
        if (auto* item = job_items_.value(id))
            item->setToolTip(kState, message);
        statusBar()->showMessage(message);
    });
    connect(&jobs_, &JobController::cancelled, this, [state](int id) { state(id, "cancelled"); });
}

void MainWindow::openModel(const QString& path)
{
    statusBar()->showMessage("Loading " + path + " ...");
    facts_->setText("Loading " + path.toHtmlEscaped() + " ...");
    jobs_.submit("load " + path, [this, path](const ProgressFn&) -> std::function<void()> {
        auto summary = summarize_model(path.toStdString());
        return [this, summary, path] {
            showSummary(summary);
            if (summary.error.empty())
                analyse(path);
        };
    });
}

void MainWindow::analyse(const QString& path)
{
    jobs_.submit(
        "spectrum of the token embedding", [this, path](const ProgressFn& progress) -> std::function<void()> {
            const auto r = embedding_spectrum(path.toStdString(), progress);
            return [this, r, path] {
                views::SpectrumData data;
                data.label = path;
                data.eigenvalues = QVector<double>(r.eigenvalues.begin(), r.eigenvalues.end());
                data.explained = QVector<double>(r.explained.begin(), r.explained.end());
                data.params_at_rank = QVector<double>(r.params_at_rank.begin(), r.params_at_rank.end());
                data.flops_at_rank = QVector<double>(r.flops_at_rank.begin(), r.flops_at_rank.end());
                data.original_params = r.original_params;
                spectrum_->setData(data);
                spectrum_->setRank(std::max(1, static_cast<int>(data.eigenvalues.size()) / 4));
            };
        });
    jobs_.submit("FLAT-LLM importance (bundled sample text)",
                 [this, path](const ProgressFn& progress) -> std::function<void()> {
                     const auto r =
                         importance_allocations(path.toStdString(), default_sample_text(), 32, 128, progress);
                     return [this, r, path] {
                         views::RankAllocationData data;
                         data.label = path;
                         data.d_head = static_cast<int>(r.d_head);
                         double top = 0;
                         for (double t : r.scores)
                             top = std::max(top, t);
                         for (double t : r.scores)
                             data.normalised.push_back(top > 0 ? t / top : 0.0);
                         for (const auto& a : r.allocations) {
                             views::Allocation v;
                             v.remaining = a.remaining;
                             v.w = QVector<double>(a.w.begin(), a.w.end());
                             for (auto k : a.ranks)
                                 v.ranks.push_back(static_cast<int>(k));
                             data.allocations.push_back(v);
                         }
                         allocation_->setData(data);
                     };
                 });
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
    if (!s.error.empty()) {
        facts_->setText("<b>Could not load the model.</b><br>" +
                        QString::fromStdString(s.error).toHtmlEscaped());
        statusBar()->showMessage("Load failed");
        emit modelShown(false);
        return;
    }
    auto num = [](int64_t n) { return QLocale().toString(static_cast<qlonglong>(n)); };
    QString html = QString("<b>%1</b><br>%2 (%3), stored %4, tokenizer %5<br>"
                           "vocabulary %6, d = %7, %8 layers, %9 heads (%10 KV), %11 head<br>"
                           "%12 parameters")
                       .arg(QString::fromStdString(s.path).toHtmlEscaped(),
                            QString::fromStdString(s.architecture), QString::fromStdString(s.format),
                            QString::fromStdString(s.dtype), QString::fromStdString(s.tokenizer),
                            num(s.vocab_size), num(s.hidden_size), num(s.layers), num(s.heads))
                       .arg(num(s.kv_heads), s.tied ? "tied" : "untied", num(s.total_parameters));
    for (const auto& w : s.warnings)
        html += "<br><font color='#b00'>warning: " + QString::fromStdString(w).toHtmlEscaped() + "</font>";
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
