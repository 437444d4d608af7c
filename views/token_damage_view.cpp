#include "token_damage_view.hpp"

#include <algorithm>
#include <cmath>

#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSaveFile>
#include <qcustomplot.h>

#include "figure_export.hpp"
#include "hover.hpp"
#include "plot_interaction.hpp"

namespace embedlab::views {

namespace {

// Two runs side by side in each bucket: the first blue, the second orange.
const QColor kRunColours[] = {{31, 119, 180}, {255, 127, 14}};
constexpr double kGroupWidth = 0.7; // of a bucket's unit width

double run_offset(int run, int runs)
{
    const double w = kGroupWidth / std::max(runs, 1);
    return -kGroupWidth / 2 + w * (run + 0.5);
}

QString number(double v)
{
    return std::isfinite(v) ? QString::number(v, 'g', 17) : QString();
}

} // namespace

TokenDamageView::TokenDamageView(QWidget* parent) : DataPlotView(parent), stats_(readout_label(this))
{
    plot_->xAxis->setLabel("times a target in the evaluation text (frequency bucket)");
    plot_->yAxis->setLabel("mean KL as target (nats)");
    plot_->yAxis2->setLabel("mean rebuild cosine (◇)");
    plot_->yAxis2->setVisible(true);
    plot_->yAxis2->setRange(0, 1.05);
    plot_->xAxis->grid()->setVisible(false);
    install_navigation(plot_);
    place_legend_below(plot_, plot_->legend, 1); // run names are long: one a row
    plot_->legend->setVisible(true);
    auto* csv = new QPushButton("Export CSV…", this);
    csv->setToolTip("Per bucket and run: tokens, positions, mean cosine, KL as target and as input");
    connect(csv, &QPushButton::clicked, this, &TokenDamageView::exportCsvInteractively);
    // File > Export figure saves the tab's neighbour graph; this plot has its own.
    auto* figure = new QPushButton("Export figure…", this);
    connect(figure, &QPushButton::clicked, this, [this] {
        FigureExportDialog dialog(this);
        if (dialog.exec() != QDialog::Accepted)
            return;
        const QString file = QFileDialog::getSaveFileName(this, "Export figure", "damage_by_frequency.pdf",
                                                          "PDF (*.pdf);;SVG (*.svg);;PNG (*.png)");
        if (file.isEmpty())
            return;
        const QString error = exportFigure(plot_, file, dialog.options());
        stats_->setText(error.isEmpty() ? summary() + ". Written to " + file : error);
    });
    auto* controls = lay_out_view(
        this,
        "<b>What am I seeing.</b> The vocabulary in buckets by how often a token is predicted in the "
        "evaluation text (0 | 1 | 2-3 | 4-7 | ...). Bars: the mean KL(P<sub>original</sub> || "
        "P<sub>compressed</sub>) where a bucket's token is the target; points: the mean cosine of its "
        "rebuilt rows against the original. LLE keeps common rows exact and rebuilds rare ones.",
        plot_);
    controls->addWidget(stats_, 1);
    controls->addWidget(csv);
    controls->addWidget(figure);
    install_hover(plot_, [this](const QPointF& p) { return hoverText(p); });
    draw();
}

QCPBars* TokenDamageView::klBars(int run) const
{
    return bars_.value(run, nullptr);
}

QCPGraph* TokenDamageView::cosineGraph(int run) const
{
    return cosines_.value(run, nullptr);
}

void TokenDamageView::draw()
{
    plot_->clearPlottables();
    bars_.clear();
    cosines_.clear();
    const int B = static_cast<int>(data_.buckets.size());
    const int R = static_cast<int>(data_.runs.size());
    double top = 0;
    for (int r = 0; r < R; ++r) {
        const auto& run = data_.runs[r];
        const QColor colour = kRunColours[r % 2];
        auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
        bars->setName(run.name); // its cosine points share the colour: one legend entry a run
        bars->setWidth(kGroupWidth / std::max(R, 1));
        bars->setPen(QPen(colour.darker(120)));
        bars->setBrush(QColor(colour.red(), colour.green(), colour.blue(), 170));
        auto* cos = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
        cos->setName(run.name + ": cosine");
        cos->removeFromLegend();
        cos->setPen(QPen(colour, 1.2, Qt::DashLine));
        cos->setScatterStyle(
            QCPScatterStyle(QCPScatterStyle::ssDiamond, QPen(colour.darker(130), 1.2), QBrush(Qt::white), 7));
        QVector<double> bk, bv, ck, cv;
        for (int b = 0; b < B; ++b) {
            const double x = b + run_offset(r, R);
            if (b < run.kl_as_target.size() && std::isfinite(run.kl_as_target[b])) {
                bk << x;
                bv << run.kl_as_target[b];
                top = std::max(top, run.kl_as_target[b]);
            }
            if (b < run.cosine.size() && std::isfinite(run.cosine[b])) {
                ck << x;
                cv << run.cosine[b];
            }
        }
        bars->setData(bk, bv, true);
        cos->setData(ck, cv, true);
        bars_ << bars;
        cosines_ << cos;
    }
    auto ticks = QSharedPointer<QCPAxisTickerText>::create();
    for (int b = 0; b < B; ++b)
        ticks->addTick(b, data_.buckets[b]);
    plot_->xAxis->setTicker(ticks);
    plot_->xAxis->setSubTicks(false);
    plot_->xAxis->setTickLabelRotation(B > 6 ? -40 : 0); // "64-127" and its neighbours stay apart
    plot_->xAxis->setRange(-0.6, std::max(B, 1) - 0.4);
    plot_->yAxis->setRange(0, top > 0 ? top * 1.12 : 1);
    plot_->yAxis2->setRange(0, 1.05);
    stats_->setText(summary());
    // Before the first run: what to do, in the axes, not an empty frame and bare ticks.
    show_placeholder(plot_, R == 0 ? "No damage measured yet:\nchoose a run above and press Compute damage."
                                   : QString());
    plot_->legend->setVisible(R > 0);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString TokenDamageView::summary() const
{
    if (data_.runs.isEmpty())
        return "No damage yet: choose a run and press Compute damage.";
    QStringList parts;
    for (const auto& run : data_.runs)
        parts << QString("%1: mean KL %2").arg(run.name).arg(run.kl_mean, 0, 'f', 4);
    return parts.join("; ") + QString(" (%1 buckets)").arg(data_.buckets.size());
}

QString TokenDamageView::hoverText(const QPointF& pixel) const
{
    if (data_.runs.isEmpty() || !plot_->axisRect()->rect().contains(pixel.toPoint()))
        return {};
    const double x = plot_->xAxis->pixelToCoord(pixel.x());
    const int b = static_cast<int>(std::lround(x));
    if (b < 0 || b >= data_.buckets.size())
        return {};
    QString text = QString("bucket %1 (targets per token)").arg(data_.buckets[b]);
    for (const auto& run : data_.runs)
        text +=
            QString("\n%1: %2 tokens, %3 positions, KL as target %4, cosine %5")
                .arg(run.name)
                .arg(run.tokens.value(b))
                .arg(run.positions.value(b))
                .arg(std::isfinite(run.kl_as_target.value(b)) ? QString::number(run.kl_as_target[b], 'f', 4)
                                                              : QString("–"))
                .arg(run.cosine.value(b), 0, 'f', 4);
    return text;
}

QString TokenDamageView::exportCsv(const QString& file) const
{
    QSaveFile out(file);
    if (!out.open(QIODevice::WriteOnly | QIODevice::Text))
        return file + ": " + out.errorString();
    QString text = "bucket,run,tokens,positions,mean_cosine,kl_as_target,kl_as_input\n";
    for (const auto& run : data_.runs)
        for (int b = 0; b < data_.buckets.size(); ++b)
            text += data_.buckets[b] + ",\"" + QString(run.name).replace('"', "\"\"") + "\"," +
                    number(run.tokens.value(b)) + ',' + number(run.positions.value(b)) + ',' +
                    number(run.cosine.value(b, NAN)) + ',' + number(run.kl_as_target.value(b, NAN)) + ',' +
                    number(run.kl_as_input.value(b, NAN)) + '\n';
    const QByteArray bytes = text.toUtf8();
    if (out.write(bytes) != bytes.size() || !out.commit())
        return file + ": " + out.errorString();
    return {};
}

void TokenDamageView::exportCsvInteractively()
{
    const QString file = QFileDialog::getSaveFileName(this, "Export damage by frequency",
                                                      "damage_by_frequency.csv", "CSV (*.csv)");
    if (file.isEmpty())
        return;
    const QString error = exportCsv(file);
    if (!error.isEmpty())
        QMessageBox::warning(this, "Export damage by frequency", error);
    else
        stats_->setText(summary() + ". Written to " + file);
}

QVector<DataTable> TokenDamageView::dataTables() const
{
    DataTable t{"damage by frequency",
                {"bucket", "run", "tokens", "positions", "mean cosine", "KL as target", "KL as input"},
                {}};
    for (const auto& run : data_.runs)
        for (int b = 0; b < data_.buckets.size(); ++b)
            t.rows << QStringList{data_.buckets[b],
                                  run.name,
                                  csvNumber(run.tokens.value(b, qQNaN())),
                                  csvNumber(run.positions.value(b, qQNaN())),
                                  csvNumber(run.cosine.value(b, qQNaN())),
                                  csvNumber(run.kl_as_target.value(b, qQNaN())),
                                  csvNumber(run.kl_as_input.value(b, qQNaN()))};
    return {t};
}

} // namespace embedlab::views
