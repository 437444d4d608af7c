#include "main_window.hpp"

#include <QFileDialog>
#include <QMenuBar>
#include <QStatusBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "parameter_breakdown_chart.hpp"

namespace embedlab::app {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), facts_(new QLabel(this)), chart_(new views::ParameterBreakdownChart(this))
{
    setWindowTitle("EmbedLab");
    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    facts_->setWordWrap(true);
    layout->addWidget(facts_);
    layout->addWidget(chart_, 1);
    setCentralWidget(central);

    auto* file = menuBar()->addMenu("&File");
    file->addAction("Open model &directory...", QKeySequence::Open, this, &MainWindow::chooseModelDirectory);
    file->addAction("Open model &file (.gguf, .bin)...", this, &MainWindow::chooseModelFile);
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);

    connect(&loading_, &QFutureWatcher<ModelSummary>::finished, this,
            [this] { showSummary(loading_.result()); });
    resize(900, 600);
}

void MainWindow::openModel(const QString& path)
{
    statusBar()->showMessage("Loading " + path + " ...");
    facts_->setText("Loading " + path.toHtmlEscaped() + " ...");
    loading_.setFuture(QtConcurrent::run([p = path.toStdString()] { return summarize_model(p); }));
}

void MainWindow::chooseModelDirectory()
{
    const QString dir = QFileDialog::getExistingDirectory(this, "Open a Hugging Face model directory");
    if (!dir.isEmpty())
        openModel(dir);
}

void MainWindow::chooseModelFile()
{
    const QString f = QFileDialog::getOpenFileName(this, "Open a model file", {},
                                                   "Models (*.gguf *.bin);;All files (*)");
    if (!f.isEmpty())
        openModel(f);
}

void MainWindow::showSummary(const ModelSummary& s)
{
    if (!s.error.empty()) {
        facts_->setText("<b>Could not load the model.</b><br>" + QString::fromStdString(s.error).toHtmlEscaped());
        statusBar()->showMessage("Load failed");
        emit modelShown(false);
        return;
    }
    auto num = [](int64_t n) { return QLocale().toString(static_cast<qlonglong>(n)); };
    QString html = QString("<b>%1</b><br>%2 (%3), stored %4, tokenizer %5<br>"
                           "vocabulary %6, d = %7, %8 layers, %9 heads (%10 KV), %11 head<br>"
                           "%12 parameters")
                       .arg(QString::fromStdString(s.path).toHtmlEscaped(), QString::fromStdString(s.architecture),
                            QString::fromStdString(s.format), QString::fromStdString(s.dtype),
                            QString::fromStdString(s.tokenizer), num(s.vocab_size), num(s.hidden_size),
                            num(s.layers), num(s.heads))
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
