#include "fourier_map_view.hpp"

#include <algorithm>
#include <cmath>

#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <qcustomplot.h>

#include "figure_export.hpp"
#include "plot_interaction.hpp"

namespace embedlab::views {

namespace {

const QVector<QColor> kLineColours{{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {120, 120, 120}};

QCPAxisRect* newRect(QCustomPlot* plot)
{
    auto* rect = new QCPAxisRect(plot);
    rect->setupFullAxesBox(true); // top and right axes follow bottom and left
    return rect;
}

// Blue for negative, white at zero, red for positive (prints well in grey too).
QCPColorGradient diverging()
{
    QCPColorGradient g;
    g.clearColorStops();
    g.setColorStopAt(0.0, QColor(33, 102, 172));
    g.setColorStopAt(0.25, QColor(146, 197, 222));
    g.setColorStopAt(0.5, QColor(247, 247, 247));
    g.setColorStopAt(0.75, QColor(244, 165, 130));
    g.setColorStopAt(1.0, QColor(178, 24, 43));
    return g;
}

} // namespace

FourierMapView::FourierMapView(QWidget* parent)
    : DataPlotView(parent), spin_(new QSpinBox(this)), stats_(readout_label(this))
{
    plot_->setAutoAddPlottableToLegend(false); // the one legend lists the neighbour curves
    install_navigation(plot_);                 // every heatmap and curve zooms and pans; a reset
    spin_->setPrefix("dimension i = ");
    spin_->setRange(0, 0);
    connect(spin_, &QSpinBox::valueChanged, this, &FourierMapView::setDimension);
    auto* controls = lay_out_view(
        this,
        "<b>What am I seeing.</b> PETE gives token p the position x = 2p/(V−1) − 1 and fixed "
        "features T<sub>i</sub> = sin or cos((⌊i/2⌋+1)·π·x); a small learned MLP adds a correction, "
        "E = T + MLP(T). The heatmaps show each matrix over the id range (id across, dimension up); "
        "below, one dimension against the id, and how similar neighbouring ids are (cosine of p and p+1). "
        "Trained embeddings are far less smooth in the id than T, which is why a fitted E is lossy.",
        plot_);
    controls->addWidget(spin_);
    controls->addWidget(stats_, 1);
    // A single column has no width to spare for the curves' y labels: there each
    // curve's axis name is its title (the top axis's label), said whole; every panel
    // keeps its x label, and an axes may be lower than QCustomPlot's 50 px (two rows
    // of 50 px axes and their labels are more than 208 px).
    setFigureLayout(plot_, [this](const QSize& size) {
        const bool narrow = size.isValid() && size.width() < 500;
        for (auto* element : plot_->plotLayout()->elements(true))
            if (auto* rect = qobject_cast<QCPAxisRect*>(element))
                rect->setMinimumSize(50, narrow ? 30 : 50);
        const auto name = [narrow](QCPAxisRect* rect, const QString& label) {
            rect->axis(QCPAxis::atLeft)->setLabel(narrow ? QString() : label);
            rect->axis(QCPAxis::atTop)->setLabel(narrow ? label : QString());
        };
        if (line_rect_)
            name(line_rect_, QString("value of dimension %1").arg(dimension_));
        if (neighbour_rect_)
            name(neighbour_rect_, "cos(row p, row p+1)");
    });
    rebuild();
}

void FourierMapView::draw()
{
    spin_->setRange(0, std::max(data_.dim - 1, 0));
    dimension_ = std::clamp(dimension_, 0, std::max(data_.dim - 1, 0));
    rebuild();
}

void FourierMapView::rebuild()
{
    plot_->clearPlottables();
    plot_->plotLayout()->clear(); // deletes the old axis rects and colour scales
    delete heights_;
    heights_ = new QCPMarginGroup(plot_);
    auto* maps = new QCPLayoutGrid;
    auto* lines = new QCPLayoutGrid;
    plot_->plotLayout()->addElement(0, 0, maps);
    plot_->plotLayout()->addElement(1, 0, lines);
    plot_->plotLayout()->setRowStretchFactor(0, 1.4);
    const int n = data_.count, d = data_.dim;
    int column = 0;
    for (const auto& m : data_.matrices) {
        auto* rect = newRect(plot_);
        maps->addElement(0, column, rect);
        auto* scale = new QCPColorScale(plot_);
        scale->setRangeDrag(false); // the colours stay centred on zero
        scale->setRangeZoom(false);
        maps->addElement(0, column + 1, scale);
        maps->setColumnStretchFactor(column + 1, 0.01);
        rect->setMarginGroup(QCP::msTop | QCP::msBottom, heights_);
        scale->setMarginGroup(QCP::msTop | QCP::msBottom, heights_);
        column += 2;
        rect->axis(QCPAxis::atTop)->setLabel(m.name);
        rect->axis(QCPAxis::atTop)->setTickLabels(false);
        rect->axis(QCPAxis::atBottom)->setLabel("token id");
        rect->axis(QCPAxis::atLeft)->setLabel(column == 2 ? "dimension" : "");
        auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
        map->setInterpolate(false);
        map->setColorScale(scale);
        scale->setGradient(diverging());
        map->setGradient(diverging());
        if (n > 0 && d > 0 && m.values.size() == static_cast<qsizetype>(n) * d) {
            map->data()->setSize(n, d);
            map->data()->setRange(QCPRange(data_.first, data_.first + n - 1), QCPRange(0, d - 1));
            double top = 0;
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < d; ++j) {
                    const double v = m.values[i * d + j];
                    map->data()->setCell(i, j, v);
                    top = std::max(top, std::abs(v));
                }
            map->setDataRange(QCPRange(-std::max(top, 1e-12), std::max(top, 1e-12))); // zero is white
            rect->axis(QCPAxis::atBottom)->setRange(data_.first - 0.5, data_.first + n - 0.5);
            rect->axis(QCPAxis::atLeft)->setRange(-0.5, d - 0.5);
        }
    }
    line_rect_ = newRect(plot_);
    neighbour_rect_ = newRect(plot_);
    lines->addElement(0, 0, line_rect_);
    lines->addElement(0, 1, neighbour_rect_);
    // Under the curves, not over them: one row below the figure.
    auto* legend = new QCPLegend;
    place_legend_below(plot_, legend, 4);
    legend->setLayer("legend");
    line_rect_->axis(QCPAxis::atBottom)->setLabel("token id");
    neighbour_rect_->axis(QCPAxis::atBottom)->setLabel("token id p");
    neighbour_rect_->axis(QCPAxis::atLeft)->setLabel("cos(row p, row p+1)");
    neighbour_rect_->axis(QCPAxis::atLeft)->setRange(-1.05, 1.05);
    for (int k = 0; k < data_.matrices.size(); ++k) {
        const auto& m = data_.matrices[k];
        const QPen pen(kLineColours[k % kLineColours.size()], 1.5);
        auto* line = plot_->addGraph(line_rect_->axis(QCPAxis::atBottom), line_rect_->axis(QCPAxis::atLeft));
        line->setPen(pen);
        line->setName(m.name);
        auto* near =
            plot_->addGraph(neighbour_rect_->axis(QCPAxis::atBottom), neighbour_rect_->axis(QCPAxis::atLeft));
        near->setPen(pen);
        near->setName(m.name);
        legend->addItem(new QCPPlottableLegendItem(legend, near));
        QVector<double> ids, cos;
        for (int i = 0; i < m.neighbour.size(); ++i) {
            ids << data_.first + i;
            cos << m.neighbour[i];
        }
        near->setData(ids, cos, true);
    }
    if (n > 0) {
        line_rect_->axis(QCPAxis::atBottom)->setRange(data_.first - 0.5, data_.first + n - 0.5);
        neighbour_rect_->axis(QCPAxis::atBottom)->setRange(data_.first - 0.5, data_.first + n - 0.5);
    }
    setDimension(dimension_);
}

void FourierMapView::setDimension(int i)
{
    const int n = data_.count, d = data_.dim;
    dimension_ = std::clamp(i, 0, std::max(d - 1, 0));
    if (spin_->value() != dimension_)
        spin_->setValue(dimension_);
    double lo = -1, hi = 1;
    int graph = 0;
    for (const auto& m : data_.matrices) {
        QVector<double> ids, v;
        if (m.values.size() == static_cast<qsizetype>(n) * d)
            for (int p = 0; p < n; ++p) {
                ids << data_.first + p;
                v << m.values[p * d + dimension_];
                lo = std::min(lo, v.back());
                hi = std::max(hi, v.back());
            }
        plot_->graph(graph)->setData(ids, v, true); // graphs alternate: line, neighbour
        graph += 2;
    }
    if (line_rect_) {
        line_rect_->axis(QCPAxis::atLeft)->setLabel(QString("value of dimension %1").arg(dimension_));
        line_rect_->axis(QCPAxis::atLeft)->setRange(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo));
    }
    stats_->setText(summary());
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString FourierMapView::summary() const
{
    if (data_.matrices.isEmpty())
        return data_.note.isEmpty() ? "no token map" : data_.note;
    QStringList parts;
    for (const auto& m : data_.matrices) {
        double s = 0;
        for (double c : m.neighbour)
            s += c;
        parts << QString("%1 %2").arg(m.name).arg(m.neighbour.isEmpty() ? 0.0 : s / m.neighbour.size(), 0,
                                                  'f', 4);
    }
    QString text =
        QString("ids %1..%2, mean neighbour cosine: ").arg(data_.first).arg(data_.first + data_.count - 1) +
        parts.join(", ");
    if (!data_.note.isEmpty())
        text += " (" + data_.note + ")";
    return text;
}

QVector<DataTable> FourierMapView::dataTables() const
{
    DataTable maps{"heatmaps", {"matrix", "token id", "token", "feature index", "value"}, {}};
    const int n = data_.count, d = data_.dim;
    for (const auto& m : data_.matrices)
        if (m.values.size() == static_cast<qsizetype>(n) * d)
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < d; ++j)
                    maps.rows << QStringList{m.name, QString::number(data_.first + i), data_.tokens.value(i),
                                             QString::number(j), csvNumber(m.values[i * d + j])};
    QVector<DataTable> tables{maps};
    if (line_rect_)
        tables += plotDataTables(plot_, line_rect_);
    if (neighbour_rect_)
        tables += plotDataTables(plot_, neighbour_rect_);
    return tables;
}

} // namespace embedlab::views
