#include "jobs_dock.hpp"

#include <QApplication>
#include <QClipboard>
#include <QContextMenuEvent>
#include <QHeaderView>
#include <QMenu>
#include <QPainter>
#include <QStyledItemDelegate>
#include <QTimer>
#include <algorithm>
#include <cmath>

#include "job_controller.hpp"

namespace embedlab::app {

namespace {

const QColor kErrorColour(176, 0, 0);
constexpr int kMargin = 4; // around an error's wrapped text

// Draws the progress cells (a bar, its percentage beside it in the text colour)
// and sizes an error's line to its wrapped text at the list's width.
class JobDelegate : public QStyledItemDelegate {
public:
    explicit JobDelegate(QTreeWidget* list) : QStyledItemDelegate(list), list_(list) {}

    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override
    {
        if (const QString error = index.data(JobList::kErrorRole).toString(); !error.isEmpty()) {
            background(painter, option, index);
            painter->save();
            painter->setPen(kErrorColour);
            painter->drawText(option.rect.adjusted(kMargin, kMargin, -kMargin, -kMargin),
                              Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, error);
            painter->restore();
            return;
        }
        if (index.column() != JobList::kProgress || !index.data(JobList::kProgressRole).isValid()) {
            QStyledItemDelegate::paint(painter, option, index);
            return;
        }
        background(painter, option, index);
        const int permille = std::clamp(index.data(JobList::kProgressRole).toInt(), 0, 1000);
        const QRect bar = JobList::barRect(option.rect, option.fontMetrics);
        painter->save();
        painter->setPen(QPen(option.palette.color(QPalette::Mid)));
        painter->setBrush(option.palette.color(QPalette::Base));
        painter->drawRect(bar.adjusted(0, 0, -1, -1));
        QRect filled = bar.adjusted(1, 1, -1, -1);
        filled.setWidth(filled.width() * permille / 1000);
        painter->fillRect(filled, option.palette.color(QPalette::Highlight));
        // Beside the bar, in the list's text colour: readable whatever the bar's fill.
        const bool selected = option.state & QStyle::State_Selected;
        painter->setPen(option.palette.color(selected ? QPalette::HighlightedText : QPalette::Text));
        painter->drawText(JobList::percentRect(option.rect, option.fontMetrics),
                          Qt::AlignRight | Qt::AlignVCenter, QString::number(permille / 10) + " %");
        painter->restore();
    }

    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override
    {
        const QString error = index.data(JobList::kErrorRole).toString();
        if (error.isEmpty())
            return QStyledItemDelegate::sizeHint(option, index);
        // The line spans the row: its width is the viewport's less the child's indent.
        const int width = std::max(list_->viewport()->width() - list_->indentation() - 2 * kMargin, 80);
        const QRect text = option.fontMetrics.boundingRect(
            QRect(0, 0, width, 1 << 20), Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, error);
        return {width, text.height() + 2 * kMargin};
    }

private:
    // The cell's background and selection, without its text (drawn by paint).
    void background(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const
    {
        QStyleOptionViewItem cell(option);
        initStyleOption(&cell, index);
        cell.text.clear();
        const QWidget* widget = option.widget ? option.widget : list_;
        widget->style()->drawControl(QStyle::CE_ItemViewItem, &cell, painter, widget);
    }

    QTreeWidget* list_;
};

} // namespace

QRect JobList::percentRect(const QRect& cell, const QFontMetrics& metrics)
{
    const int width = metrics.horizontalAdvance("100 %") + 4;
    return {cell.right() - width - 2, cell.top(), width, cell.height()};
}

QRect JobList::barRect(const QRect& cell, const QFontMetrics& metrics)
{
    const QRect text = percentRect(cell, metrics);
    return QRect(QPoint(cell.left() + 3, cell.top() + 3), QPoint(text.left() - 4, cell.bottom() - 3));
}

QString JobList::timeText(qint64 elapsed_ms, double fraction)
{
    const QString elapsed = QString::number(elapsed_ms / 1000.0, 'f', 1) + " s";
    // Issue 61 item 7: a long run's "1 %" alone says nothing of when it ends. Too early
    // (under 3 s, under 1 %) the pace is not yet known; done, nothing is left.
    if (elapsed_ms < 3000 || fraction < 0.01 || fraction >= 1.0)
        return elapsed;
    const double left = elapsed_ms / 1000.0 * (1.0 - fraction) / fraction; // seconds at this pace
    QString in;
    if (left < 90)
        in = QString("%1 s").arg(std::max(1.0, std::round(left / 5) * 5));
    else if (left < 90 * 60)
        in = QString("%1 min").arg(std::round(left / 60));
    else
        in = QString("%1 h").arg(left / 3600, 0, 'f', 1);
    return elapsed + ", about " + in + " left";
}

JobList::JobList(JobController& jobs, QWidget* parent) : QTreeWidget(parent), jobs_(jobs)
{
    setObjectName("job_list");
    setHeaderLabels({"Job", "State", "Progress", "Time"});
    setRootIsDecorated(false);
    setIndentation(12);
    setUniformRowHeights(false); // an error's line is as tall as its text
    setItemDelegate(new JobDelegate(this));
    setContextMenuPolicy(Qt::DefaultContextMenu);
    header()->setStretchLastSection(false);
    header()->setSectionResizeMode(kName, QHeaderView::Stretch);
    header()->setSectionResizeMode(kState, QHeaderView::ResizeToContents);
    header()->setSectionResizeMode(kProgress, QHeaderView::Fixed);
    header()->setSectionResizeMode(kTime, QHeaderView::ResizeToContents);
    header()->resizeSection(kProgress, 150);
    setToolTip("Right-click a job: Re-run, Cancel, Copy error");

    connect(&jobs_, &JobController::queued, this, [this](int id, const QString& name) {
        auto* line = new QTreeWidgetItem(this, {name, "queued", "", ""});
        line->setData(kName, kIdRole, id);
        line->setData(kProgress, kProgressRole, 0);
        line->setToolTip(kName, name);
        items_[id] = line;
        states_[id] = "queued";
        scrollToItem(line);
    });
    connect(&jobs_, &JobController::started, this, [this](int id) {
        clocks_[id].start();
        setState(id, "running");
    });
    // The running job's time ticks on its own, not only when progress arrives.
    auto* ticker = new QTimer(this);
    ticker->setObjectName("job_clock");
    connect(ticker, &QTimer::timeout, this, [this] {
        const int id = jobs_.running();
        if (auto* line = items_.value(id); line && clocks_.contains(id))
            line->setText(kTime, timeText(clocks_[id].elapsed(), fractions_.value(id)));
    });
    ticker->start(200);
    connect(&jobs_, &JobController::progress, this, [this](int id, qint64 done, qint64 total) {
        if (auto* line = items_.value(id))
            line->setData(kProgress, kProgressRole, total > 0 ? static_cast<int>(1000 * done / total) : 0);
        fractions_[id] = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
        setState(id, "running");
    });
    connect(&jobs_, &JobController::finished, this, [this](int id, double) {
        if (auto* line = items_.value(id))
            line->setData(kProgress, kProgressRole, 1000);
        setState(id, "done");
    });
    connect(&jobs_, &JobController::failed, this, [this](int id, const QString& message) {
        setState(id, "failed");
        errors_[id] = message;
        if (auto* line = items_.value(id)) {
            line->setForeground(kState, QBrush(kErrorColour));
            line->setToolTip(kState, message);
            // The whole error under the job, wrapped to the list's width.
            auto* why = new QTreeWidgetItem(line, {message});
            why->setData(kName, kErrorRole, message);
            why->setForeground(kName, QBrush(kErrorColour));
            why->setToolTip(kName, message);
            why->setFirstColumnSpanned(true);
            line->setExpanded(true);
        }
    });
    connect(&jobs_, &JobController::cancelled, this, [this](int id) { setState(id, "cancelled"); });
}

int JobList::jobOf(const QTreeWidgetItem* item) const
{
    while (item && item->parent())
        item = item->parent();
    return item ? item->data(kName, kIdRole).toInt() : -1;
}

void JobList::setState(int id, const QString& state)
{
    auto* line = items_.value(id);
    if (!line)
        return;
    // A job asked to stop says so until it has; a job with a status of its own
    // (a Slurm task's) shows that while it runs.
    if (state == "running" && cancelling_.contains(id))
        return;
    if (state != "running")
        cancelling_.remove(id), status_.remove(id), fractions_.remove(id);
    states_[id] = state;
    line->setText(kState, state == "running" && status_.contains(id) ? status_[id] : state);
    if (clocks_.contains(id))
        line->setText(kTime, timeText(clocks_[id].elapsed(), fractions_.value(id)));
}

void JobList::setCancelling(int id)
{
    if (auto* line = items_.value(id)) {
        cancelling_.insert(id);
        line->setText(kState, "cancelling");
    }
}

void JobList::setStatus(int id, const QString& status)
{
    auto* line = items_.value(id);
    if (!line || cancelling_.contains(id) || states_.value(id) != "running")
        return;
    status_[id] = status;
    line->setText(kState, status);
}

QMenu* JobList::menuFor(QTreeWidgetItem* item, QWidget* parent)
{
    const int id = jobOf(item);
    auto* menu = new QMenu(parent);
    if (id <= 0)
        return menu;
    const QString state = states_.value(id);
    const bool ended = state == "done" || state == "failed" || state == "cancelled";
    QAction* again = menu->addAction("Re-run", this, [this, id] { jobs_.resubmit(id); });
    again->setToolTip("Queue this job again (a compression adds a new results row)");
    again->setEnabled(ended);
    QAction* cancel = menu->addAction("Cancel", this, [this, id] { emit cancelRequested(id); });
    cancel->setEnabled(!ended && !cancelling_.contains(id));
    QAction* copy = menu->addAction("Copy error", this,
                                    [this, id] { QApplication::clipboard()->setText(errors_.value(id)); });
    copy->setEnabled(errors_.contains(id));
    return menu;
}

void JobList::contextMenuEvent(QContextMenuEvent* event)
{
    QTreeWidgetItem* at = itemAt(viewport()->mapFromGlobal(event->globalPos()));
    if (!at)
        return;
    setCurrentItem(at);
    QMenu* menu = menuFor(at, this);
    menu->exec(event->globalPos());
    delete menu;
}

void JobList::resizeEvent(QResizeEvent* event)
{
    QTreeWidget::resizeEvent(event);
    scheduleDelayedItemsLayout(); // an error's wrapped height depends on the width
}

} // namespace embedlab::app
