#include "plot_interaction.hpp"

#include <QAction>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace embedlab::views {

namespace {

constexpr const char* kHome = "embedlab_home";       // QPointF(lower, upper): the range the view set
constexpr const char* kTracked = "embedlab_tracked"; // the axis's rangeChanged is watched

void setHome(QCPAxis* axis, const QCPRange& range)
{
    axis->setProperty(kHome, QPointF(range.lower, range.upper));
}

// The axis's range fitted to the visible data on its current scale, with a margin.
void fitToData(QCPAxis* axis)
{
    const QCPRange before = axis->range();
    axis->rescale(true); // positive values only on a log axis
    QCPRange r = axis->range();
    if (r == before && axis->scaleType() == QCPAxis::stLogarithmic && r.lower <= 0)
        r = QCPRange(1e-3, 1);
    if (axis->scaleType() == QCPAxis::stLogarithmic)
        axis->setRange(r.lower / 1.5, r.upper * 1.5);
    else {
        const double pad = r.size() > 0 ? 0.05 * r.size() : 0.5;
        axis->setRange(r.lower - pad, r.upper + pad);
    }
}

} // namespace

PlotNavigation::PlotNavigation(QCustomPlot* plot)
    : QObject(plot), plot_(plot), reset_(new QAction("Reset view", this))
{
    setObjectName("plot_navigation");
    reset_->setToolTip("Every axis back to the data's range (also: double-click the plot)");
    connect(reset_, &QAction::triggered, this, &PlotNavigation::resetView);
    plot->setInteractions(plot->interactions() | QCP::iRangeDrag | QCP::iRangeZoom);
    plot->installEventFilter(this);
    connect(plot, &QCustomPlot::beforeReplot, this, &PlotNavigation::trackAxes);
    connect(plot, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent* e) {
        if (e->button() == Qt::LeftButton)
            resetView();
    });
    plot->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(plot, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
        QMenu* menu = contextMenu(plot_);
        menu->setAttribute(Qt::WA_DeleteOnClose);
        menu->popup(plot_->mapToGlobal(at));
    });
    trackAxes();
}

void PlotNavigation::trackAxes()
{
    for (QCPAxisRect* rect : plot_->axisRects())
        for (QCPAxis* axis : rect->axes()) {
            if (axis->property(kTracked).toBool())
                continue;
            axis->setProperty(kTracked, true);
            setHome(axis, axis->range());
            connect(axis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
                    [this, axis](const QCPRange& range) {
                        if (user_)
                            return;
                        setHome(axis, range);
                        // New data: a range kept for the other scale no longer fits it.
                        for (auto& t : toggles_)
                            if (t.axis == axis)
                                t.linear.has_range = t.log.has_range = false;
                    });
        }
}

bool PlotNavigation::eventFilter(QObject* watched, QEvent* event)
{
    // Wheel zoom and drag pan change ranges inside these events: delivered here,
    // flagged, so those ranges are not taken for the view's own.
    const bool moves =
        event->type() == QEvent::Wheel ||
        (event->type() == QEvent::MouseMove && static_cast<QMouseEvent*>(event)->buttons() != Qt::NoButton);
    if (watched != plot_ || !moves || user_)
        return false;
    user_ = true;
    static_cast<QObject*>(plot_)->event(event);
    user_ = false;
    return true;
}

void PlotNavigation::resetView()
{
    trackAxes();
    for (QCPAxisRect* rect : plot_->axisRects())
        for (QCPAxis* axis : rect->axes()) {
            const QVariant home = axis->property(kHome);
            if (home.isValid())
                axis->setRange(home.toPointF().x(), home.toPointF().y());
        }
    plot_->replot();
}

QAction* PlotNavigation::addLogToggle(QCPAxis* axis, const QString& name)
{
    auto* action = new QAction("Logarithmic " + name, this);
    action->setCheckable(true);
    action->setChecked(axis->scaleType() == QCPAxis::stLogarithmic);
    connect(action, &QAction::triggered, this, [this, axis](bool on) { setLogScale(axis, on); });
    toggles_.push_back({axis, action, {}, {}});
    return action;
}

QList<QAction*> PlotNavigation::logToggles() const
{
    QList<QAction*> actions;
    for (const auto& t : toggles_)
        actions << t.action;
    return actions;
}

void PlotNavigation::setLogScale(QCPAxis* axis, bool log)
{
    auto it = std::find_if(toggles_.begin(), toggles_.end(), [&](const Toggle& t) { return t.axis == axis; });
    if (it == toggles_.end() || !axis)
        return;
    const QSignalBlocker block(it->action);
    it->action->setChecked(log);
    if ((axis->scaleType() == QCPAxis::stLogarithmic) == log)
        return;
    Scale& from = log ? it->linear : it->log;
    Scale& to = log ? it->log : it->linear;
    const QPointF home = axis->property(kHome).toPointF();
    from = {true, axis->ticker(), axis->numberFormat(), axis->numberPrecision(), true, home.x(), home.y()};
    user_ = true; // the ranges set below are this scale's, not new data's: kept apart
    axis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (to.saved) {
        axis->setTicker(to.ticker);
        axis->setNumberFormat(to.format);
        axis->setNumberPrecision(to.precision);
    } else if (log) { // powers of ten, all in one notation
        axis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
        axis->setNumberFormat("eb");
        axis->setNumberPrecision(0);
    } else {
        axis->setTicker(QSharedPointer<QCPAxisTicker>::create());
        axis->setNumberFormat("gbd");
        axis->setNumberPrecision(6);
    }
    if (to.has_range)
        axis->setRange(to.lower, to.upper);
    else
        fitToData(axis);
    user_ = false;
    setHome(axis, axis->range());
    plot_->replot();
}

QMenu* PlotNavigation::contextMenu(QWidget* parent) const
{
    auto* menu = new QMenu(parent);
    menu->addAction(reset_);
    if (!toggles_.isEmpty())
        menu->addSeparator();
    for (const auto& t : toggles_)
        menu->addAction(t.action);
    return menu;
}

PlotNavigation* install_navigation(QCustomPlot* plot)
{
    if (auto* existing = navigation(plot))
        return existing;
    return new PlotNavigation(plot);
}

PlotNavigation* navigation(const QCustomPlot* plot)
{
    return plot ? plot->findChild<PlotNavigation*>("plot_navigation", Qt::FindDirectChildrenOnly) : nullptr;
}

void place_legend_below(QCustomPlot* plot, QCPLegend* legend, int columns)
{
    if (QCPLayout* parent = legend->layout()) {
        parent->take(legend);
        parent->simplify();
    }
    QCPLayoutGrid* layout = plot->plotLayout();
    layout->simplify();
    // Elements side by side (two axes): grouped in one cell, so the legend's row
    // spans them all.
    if (layout->columnCount() > 1) {
        struct Cell {
            int row, column;
            QCPLayoutElement* element;
        };
        QVector<Cell> cells;
        for (int r = 0; r < layout->rowCount(); ++r)
            for (int c = 0; c < layout->columnCount(); ++c)
                if (QCPLayoutElement* e = layout->element(r, c))
                    cells.push_back({r, c, e});
        const QList<double> column_stretch = layout->columnStretchFactors();
        const QList<double> row_stretch = layout->rowStretchFactors();
        for (const auto& cell : cells)
            layout->take(cell.element);
        layout->simplify();
        auto* group = new QCPLayoutGrid;
        layout->addElement(0, 0, group);
        for (const auto& cell : cells)
            group->addElement(cell.row, cell.column, cell.element);
        group->setColumnStretchFactors(column_stretch);
        group->setRowStretchFactors(row_stretch);
    }
    const int row = layout->rowCount();
    layout->addElement(row, 0, legend);
    layout->setRowStretchFactor(row, 0.001); // as tall as its entries need
    layout->setRowSpacing(0);
    legend->setBorderPen(Qt::NoPen);
    legend->setFont(QFont(legend->font().family(), 8));
    legend->setIconSize(16, 9);
    legend->setIconTextPadding(4);
    legend->setMargins(QMargins(4, 0, 4, 2));
    legend->setRowSpacing(0);
    legend->setColumnSpacing(10);
    legend->setWrap(std::max(columns, 1));
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
    // A legend's largest size is that of its entries: with none (no runs yet), 8 px,
    // which held the axes above it to a 130-px sliver (issue 61). Any width will do
    // (a set maximum wins over the entries'; QWIDGETSIZE_MAX means "unset" and
    // QWIDGETSIZE_MAX - 1 overflows with the margins added).
    legend->setMaximumSize(1 << 20, legend->maximumSize().height());
}

namespace {
constexpr const char* kPlaceholderName = "empty_plot_placeholder";

QCPItemText* placeholder_item(const QCustomPlot* plot)
{
    for (int i = 0; i < plot->itemCount(); ++i)
        if (plot->item(i)->objectName() == kPlaceholderName)
            return qobject_cast<QCPItemText*>(plot->item(i));
    return nullptr;
}
} // namespace

void show_placeholder(QCustomPlot* plot, const QString& text)
{
    QCPItemText* note = placeholder_item(plot);
    if (!text.isEmpty() && !note) {
        note = new QCPItemText(plot);
        note->setObjectName(kPlaceholderName);
        note->setClipToAxisRect(false);
        note->position->setType(QCPItemPosition::ptAxisRectRatio);
        note->position->setCoords(0.5, 0.5);
        note->setPositionAlignment(Qt::AlignCenter);
        note->setTextAlignment(Qt::AlignCenter);
        note->setColor(QColor(90, 90, 90));
        note->setPadding(QMargins(8, 6, 8, 6));
    }
    if (note) {
        if (text.isEmpty())
            plot->removeItem(note);
        else
            note->setText(text);
    }
    for (QCPAxis* axis : plot->axisRect()->axes()) {
        axis->setTicks(text.isEmpty());
        axis->setTickLabels(text.isEmpty());
    }
}

QString placeholder(const QCustomPlot* plot)
{
    const QCPItemText* note = placeholder_item(plot);
    return note ? note->text() : QString();
}

QHBoxLayout* lay_out_view(QWidget* view, const QString& about, QWidget* main)
{
    auto* paragraph = new QLabel(about, view);
    paragraph->setWordWrap(true);
    auto* controls = new QHBoxLayout;
    auto* layout = new QVBoxLayout(view);
    layout->addWidget(paragraph);
    layout->addWidget(main, 1);
    layout->addLayout(controls);
    return controls;
}

QLabel* readout_label(QWidget* parent)
{
    auto* label = new QLabel(parent);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setWordWrap(true);
    return label;
}

} // namespace embedlab::views
