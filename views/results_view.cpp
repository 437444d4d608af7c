#include "results_view.hpp"

#include <QAction>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPointer>
#include <QRegularExpression>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QUndoStack>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <qcustomplot.h>

#include "figure_export.hpp"
#include "hover.hpp"
#include "plot_interaction.hpp"
#include "plot_view.hpp"
#include "window_divergence_view.hpp"

namespace embedlab::views {

namespace {

constexpr int kSortRole = Qt::UserRole + 1;
constexpr int kRowRole = Qt::UserRole + 2;
constexpr int kModelRole = Qt::UserRole + 3;    // the row's model path, for the model filter
constexpr int kBaselineRole = Qt::UserRole + 4; // an "original" row's model, part and text
constexpr int kPplColumn = 4, kDeltaColumn = 5;
constexpr int kTaskColumn = 11, kModelColumn = 12, kBitsPerByteColumn = 14, kBytesColumn = 15;

// A model's marker shape when several models are shown (diamonds are the baselines').
QCPScatterStyle::ScatterShape model_shape(qsizetype model)
{
    static const QVector<QCPScatterStyle::ScatterShape> shapes{
        QCPScatterStyle::ssDisc,     QCPScatterStyle::ssSquare,
        QCPScatterStyle::ssTriangle, QCPScatterStyle::ssTriangleInverted,
        QCPScatterStyle::ssCross,    QCPScatterStyle::ssStar,
        QCPScatterStyle::ssPlus,     QCPScatterStyle::ssCrossCircle};
    return shapes[static_cast<int>(std::max<qsizetype>(model, 0) % shapes.size())];
}

QStandardItem* textItem(const QString& s)
{
    auto* item = new QStandardItem(s);
    item->setData(s, kSortRole);
    return item;
}

QStandardItem* numberItem(double v, const QString& shown)
{
    auto* item = new QStandardItem(shown);
    item->setData(v, kSortRole);
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

QString shown(double v, int decimals)
{
    if (!std::isfinite(v))
        return QString::fromUtf8("\u2013");
    // A far-off fit's perplexity: scientific beyond 1e6, as the demo report does.
    return std::fabs(v) >= 1e6 ? QString::number(v, 'e', 3) : QString::number(v, 'f', decimals);
}

QString text(const std::string& s)
{
    return QString::fromStdString(s);
}

// A model as the table names it: its directory or file name.
QString modelName(const std::string& model)
{
    const QString path = text(model);
    const QString trimmed = path.endsWith('/') ? path.chopped(1) : path;
    const QString name = trimmed.section('/', -1);
    return name.isEmpty() ? QString("(unknown model)") : name;
}

// With several models a figure's legend names each method's colour and each model's
// marker once, and each kind of front once (four methods on three models: eight
// entries, not fifteen), so a single column keeps its height for the plot. The
// entries are empty series that only the legend draws; restore() puts the
// window's legend back.
class GroupedLegend {
public:
    // `models`: the series' models in order of first appearance (their marker shapes).
    void group(QCustomPlot* plot, const QStringList& methods, const QStringList& models,
               const QStringList& baselines)
    {
        for (int i = 0; i < plot->legend->itemCount(); ++i)
            if (auto* item = qobject_cast<QCPPlottableLegendItem*>(plot->legend->item(i)))
                was_ << item->plottable();
        for (auto& p : was_)
            p->removeFromLegend();
        QStringList fronts;
        for (auto& p : was_)
            if (auto* front = qobject_cast<QCPGraph*>(p.data())) {
                const QString kind = front->name().section(QString::fromUtf8(" \u2014 "), 0, 0);
                if (!fronts.contains(kind)) {
                    fronts << kind;
                    add(plot, kind, front->pen(), QCPScatterStyle());
                }
            }
        QStringList named;
        for (const QString& method : methods)
            if (!named.contains(method)) {
                named << method;
                const QColor colour = method_colour(method);
                const bool baseline = baselines.contains(method);
                add(plot, baseline ? method + " (baseline)" : method, Qt::NoPen,
                    QCPScatterStyle(baseline ? QCPScatterStyle::ssDiamond : QCPScatterStyle::ssDisc, colour,
                                    colour, baseline ? 10 : 9));
            }
        const QColor grey(90, 90, 90);
        for (int m = 0; m < models.size(); ++m)
            add(plot, modelName(models[m].toStdString()), Qt::NoPen,
                QCPScatterStyle(model_shape(m), grey, grey, 9));
    }
    void restore(QCustomPlot* plot)
    {
        for (auto* entry : entries_)
            plot->removePlottable(entry);
        for (auto& p : was_)
            if (p)
                p->addToLegend();
        entries_.clear();
        was_.clear();
    }
    bool grouped() const { return !entries_.isEmpty(); }

private:
    void add(QCustomPlot* plot, const QString& name, const QPen& pen, const QCPScatterStyle& marker)
    {
        auto* entry = plot->addGraph(plot->xAxis, plot->yAxis);
        entry->setName(name);
        entry->setPen(pen);
        entry->setLineStyle(pen.style() == Qt::NoPen ? QCPGraph::lsNone : QCPGraph::lsLine);
        entry->setScatterStyle(marker);
        entry->addToLegend();
        entries_ << entry;
    }

    QVector<QPointer<QCPAbstractPlottable>> was_; // the window's legend, in order
    QVector<QCPGraph*> entries_;
};

// An undoable step as two functions (the view does the work).
class FunctionCommand : public QUndoCommand {
public:
    FunctionCommand(const QString& text, std::function<void()> redo, std::function<void()> undo)
        : QUndoCommand(text), redo_(std::move(redo)), undo_(std::move(undo))
    {
    }
    void redo() override { redo_(); }
    void undo() override { undo_(); }

private:
    std::function<void()> redo_, undo_;
};

} // namespace

// A deleted run: its summary and its table row (owned here until put back).
struct ResultsView::TakenRow {
    ResultRow row;
    int at = -1; // its place in the table's source model
    QList<QStandardItem*> items;
    ~TakenRow() { qDeleteAll(items); }
};

ResultsView::ResultsView(QWidget* parent)
    : QWidget(parent), table_(new QTableView(this)), model_(new QStandardItemModel(0, 16, this)),
      proxy_(new QSortFilterProxyModel(this)), plot_(new QCustomPlot(this)),
      windows_(new WindowDivergenceView(this)), model_filter_(new QComboBox(this)),
      x_metric_(new QComboBox(this)), y_metric_(new QComboBox(this)), y_scale_(new QComboBox(this)),
      undo_(new QUndoStack(this))
{
    model_->setHorizontalHeaderLabels({"method", "parameters", "params", "ratio", "PPL", "Δ ln PPL", "cosine",
                                       "time (s)", "host", "KL (nats)",
                                       "top-1",    // runs that measured their divergence from the original
                                       "task acc", // runs that measured a zero-shot task (sst2, mc)
                                       "model", "part", "bits/byte", "bytes"});
    model_->horizontalHeaderItem(kBitsPerByteColumn)
        ->setToolTip("Bits per byte of the evaluation text: the scored tokens' NLL in bits over the bytes "
                     "they decode to. Unlike PPL it compares models that tokenize the text differently; "
                     "the tooltip has the original's");
    model_->horizontalHeaderItem(kBytesColumn)
        ->setToolTip("The compressed part's bytes as stored (a quantised table: its blocks; factors: "
                     "float32); the tooltip has the ratio to the input's bytes");
    model_->horizontalHeaderItem(kPplColumn)
        ->setToolTip("A decoder's perplexity on the evaluation text; an encoder's pseudo-perplexity (its "
                     "masked-LM head, each token masked in turn); \u2013 where none applies (hover the "
                     "cell for why)");
    model_->horizontalHeaderItem(kTaskColumn)
        ->setToolTip("Zero-shot task accuracy (the method panel's Task); the original's row shows the "
                     "uncompressed model's on the same examples");
    proxy_->setSourceModel(model_);
    proxy_->setFilterKeyColumn(kModelColumn);
    proxy_->setFilterRole(kModelRole);
    model_filter_->addItem("All models", QString());
    model_filter_->setToolTip("Show the rows (and Pareto fronts) of one model");
    connect(model_filter_, &QComboBox::currentIndexChanged, this, [this] {
        const QString model = modelFilter();
        proxy_->setFilterRegularExpression(
            model.isEmpty() ? QRegularExpression()
                            : QRegularExpression("^" + QRegularExpression::escape(model) + "$"));
        rebuildPlot();
    });
    proxy_->setSortRole(kSortRole);
    table_->setModel(proxy_);
    table_->setSortingEnabled(true);
    table_->sortByColumn(-1, Qt::AscendingOrder); // order of addition until a header is clicked
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->verticalHeader()->setVisible(false);
    table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    auto* remove = new QAction("Delete row", table_);
    remove->setShortcut(QKeySequence::Delete);
    remove->setShortcutContext(Qt::WidgetShortcut);
    connect(remove, &QAction::triggered, this, [this] { removeRow(selected_); });
    table_->addAction(remove);
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                const int row = current.isValid() ? proxy_->data(current, kRowRole).toInt() : -1;
                if (row != selected_)
                    selectRow(row);
            });

    plot_->xAxis->setLabel("compression ratio (compressed / original parameters)");
    plot_->yAxis->setLabel("Δ ln PPL");
    plot_->legend->setVisible(true);
    place_legend_below(plot_, plot_->legend, 4); // never over a run's point
    // Ratios span decades (pca k = 8 of 768 beside the original's 1): log on request;
    // the y axis has its own symlog choice above the plot.
    install_navigation(plot_)->addLogToggle(plot_->xAxis, "ratio axis");
    // Created first, so the method series (added later) draw over it and win clicks.
    front_ = plot_->addGraph(plot_->xAxis, plot_->yAxis);
    front_->setName("Pareto front");
    front_->setLineStyle(QCPGraph::lsStepLeft); // horizontal to the next ratio, then down
    front_->setPen(QPen(QColor(90, 90, 90), 1.5, Qt::DashLine));
    ring_ = new QCPCurve(plot_->xAxis, plot_->yAxis);
    ring_->setLineStyle(QCPCurve::lsNone);
    ring_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::black, 2), Qt::NoBrush, 16));
    ring_->removeFromLegend();
    setScreenOnly(ring_); // marks the table's selected row: not part of a figure
    // A figure of the plot carries the selected row's KL per window beside it, as the
    // window does (the panel is in the plot only while the figure is drawn).
    auto figure_panel = std::make_shared<std::pair<QCPLayoutGrid*, WindowPanel>>();
    auto legend = std::make_shared<GroupedLegend>();
    setFigureLayout(plot_, [this, figure_panel, legend](const QSize& size) {
        QStringList models; // the series' models, when they are several
        for (const QString& model : series_models_)
            if (!model.isEmpty() && !models.contains(model))
                models << model;
        if (size.isValid() && !models.isEmpty() && !legend->grouped())
            legend->group(plot_, methods_, models, baseline_methods_);
        else if (!size.isValid())
            legend->restore(plot_);
        QCPLayoutGrid* layout = plot_->plotLayout();
        auto& [group, panel] = *figure_panel;
        QCPAxisRect* pareto = plot_->axisRect();
        if (size.isValid() && !group && selected_ >= 0 && !rows_[selected_].window_kl.empty() &&
            layout->element(0, 0) == pareto) {
            layout->take(pareto);
            group = new QCPLayoutGrid;
            layout->addElement(0, 0, group); // the legend's row still spans both panels
            group->addElement(0, 0, pareto);
            group->addElement(0, 1, new QCPAxisRect(plot_));
            group->setColumnStretchFactor(1, 0.6);
            panel = addWindowPanel(qobject_cast<QCPAxisRect*>(group->element(0, 1)));
            panel.kl->removeFromLegend(); // its axes name both curves
            panel.top1->removeFromLegend();
            showWindows(panel, &rows_[selected_]);
        } else if (!size.isValid() && group) {
            plot_->removeGraph(panel.kl);
            plot_->removeGraph(panel.top1);
            group->take(pareto);
            layout->take(group);
            delete group; // and the panel's axes
            layout->addElement(0, 0, pareto);
            *figure_panel = {};
        }
    });
    connect(plot_, &QCustomPlot::plottableClick, this,
            [this](QCPAbstractPlottable* p, int index, QMouseEvent*) {
                for (size_t g = 0; g < shown_groups_.size(); ++g)
                    if (p == (g == 0 ? front_ : more_fronts_[static_cast<int>(g) - 1])) {
                        const auto& front = shown_groups_[g].front;
                        if (index >= 0 && index < static_cast<int>(front.size()))
                            selectRow(front[index]);
                        return;
                    }
                pointClicked(qobject_cast<QCPCurve*>(p), index);
            });

    auto* about = new QLabel(
        "<b>What am I seeing.</b> One row per finished compression job. The plot puts each run's "
        "bytes ratio (the compressed part's bytes as stored, after / before; the x axis box switches to "
        "stored values) against Δ ln PPL = ln PPL<sub>compressed</sub> − ln PPL<sub>original</sub> on the "
        "sample text (0: no loss). Points towards the lower left are better; the dashed staircase joins the "
        "runs no other run beats on both (the Pareto front); the quantised tables (quant, diamonds on a "
        "dashed line) are the baseline to beat at equal bytes. Click a point to select its row; beside the "
        "plot, the selected "
        "row's KL from the original in each evaluation window (runs with + KL vs original).",
        this);
    // One line on the tab (issue 61: three wrapped lines cost the table its rows at
    // 1366x768); the whole explanation is its tooltip.
    about->setToolTip(about->text());
    about->setText("<b>What am I seeing?</b> One row per finished run; lower left is better.");
    about->setTextFormat(Qt::RichText);
    about->setWordWrap(true); // narrower than its line, it wraps: never the tab's minimum width
    // The selected row's KL per window beside the Pareto plot, shown for rows that measured it.
    auto* plots = new QSplitter(Qt::Horizontal, this);
    plots->addWidget(plot_);
    plots->addWidget(windows_);
    plots->setStretchFactor(0, 3);
    plots->setStretchFactor(1, 2);
    windows_->hide();
    keep_readable_size(plot_);
    plots->setChildrenCollapsible(false); // a dragged splitter never crushes an axis
    auto* split = new QSplitter(Qt::Vertical, this);
    split->setObjectName("results_split");
    split->addWidget(table_);
    // At least three rows of the table beside the plot's readable minimum, and a third of
    // the height beyond (issue 61: the tab fits a 1366x768 screen with a taskbar).
    table_->setMinimumHeight(table_->horizontalHeader()->sizeHint().height() +
                             3 * table_->verticalHeader()->defaultSectionSize() + 2 * table_->frameWidth() +
                             2);
    split->addWidget(plots);
    split->setChildrenCollapsible(false);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 2);
    x_metric_->addItems({"parameter ratio", "bytes ratio"});
    // The user's pick: the default rule sets the box with signals blocked. Connected before
    // the redraw below, which reads it (`activated` came after it and lost the first pick).
    connect(x_metric_, &QComboBox::currentIndexChanged, this, [this] { x_chosen_ = true; });
    x_metric_->setToolTip(
        "What the plot's x axis shows: stored values after / before, or the part's bytes\n"
        "as stored after / before (compare a method with the quantised table at equal "
        "bytes;\nrows without bytes, from results files written before they were recorded, are left off)");
    y_metric_->addItems({"Δ ln PPL", "KL (nats)", "1 − top-1 agreement", "PPL", "1 − task accuracy",
                         "1 − mean cosine", "Δ bits per byte"});
    y_metric_->setToolTip(
        "What the plot's y axis shows (lower is better for each; the Pareto fronts follow it).\n"
        "KL and top-1 need runs that measured their divergence (+ KL vs original);\n"
        "task accuracy runs that measured a task (the method panel's Task);\n"
        "1 − mean cosine: the table's reconstruction, which every run has (encoders have no perplexity);\n"
        "Δ bits per byte: against the original on the same text, comparable across tokenizations.");
    y_scale_->addItems({"linear", "symlog"});
    y_scale_->setToolTip(
        "symlog: linear near 0, logarithmic beyond, so one far-off run does not squash the rest\n"
        "(chosen by itself, until picked here, when the values span two decades beyond 0.01)");
    // Any change but the rule's own (made with signals blocked) is the user's pick; connected
    // before the redraw below, which reads it.
    connect(y_scale_, &QComboBox::currentIndexChanged, this, [this] { y_scale_chosen_ = true; });
    for (QComboBox* box : {x_metric_, y_metric_, y_scale_})
        connect(box, &QComboBox::currentIndexChanged, this, [this] { rebuildPlot(); });
    // The explanation and the plot's choices share a row (issue 61: a row less for the table).
    auto* filter_row = new QHBoxLayout;
    filter_row->addWidget(about, 1);
    filter_row->addWidget(new QLabel("Model", this));
    filter_row->addWidget(model_filter_);
    filter_row->addWidget(new QLabel("x axis", this));
    filter_row->addWidget(x_metric_);
    filter_row->addWidget(new QLabel("y axis", this));
    filter_row->addWidget(y_metric_);
    filter_row->addWidget(y_scale_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0); // the tab's own margins frame it
    layout->addLayout(filter_row);
    layout->addWidget(split, 1);
    rebuildPlot();
    install_hover(plot_, [this](const QPointF& p) { return hoverText(p); });
}

QList<QStandardItem*> ResultsView::rowItems(const ResultRow& r, int index) const
{
    const double params = static_cast<double>(r.params_after);
    QList<QStandardItem*> items{textItem(text(r.method)),
                                textItem(text(r.parameters)),
                                numberItem(params, QLocale().toString(params, 'f', 0)),
                                numberItem(r.ratio, shown(r.ratio, 4)),
                                numberItem(r.ppl, shown(r.ppl, 3)),
                                numberItem(r.delta_ln_ppl, shown(r.delta_ln_ppl, 4)),
                                numberItem(r.mean_cosine, shown(r.mean_cosine, 4)),
                                numberItem(r.seconds, shown(r.seconds, 1)),
                                textItem(text(r.host)),
                                numberItem(r.kl_mean, shown(r.kl_mean, 4)),
                                numberItem(r.top1_agreement, shown(r.top1_agreement, 4)),
                                numberItem(r.task_accuracy, shown(r.task_accuracy, 4)),
                                textItem(modelName(r.model)),
                                textItem(r.part == "attention_values"           ? "attention values"
                                         : r.part == "attention_values_and_mlp" ? "attention values + MLP"
                                                                                : "token embedding"),
                                numberItem(r.bits_per_byte, shown(r.bits_per_byte, 4)),
                                numberItem(r.bytes_after, std::isfinite(r.bytes_after)
                                                              ? QLocale().toString(r.bytes_after, 'f', 0)
                                                              : QString())};
    if (std::isfinite(r.bytes_after) && r.bytes_before > 0)
        items[kBytesColumn]->setToolTip(QString("bytes ratio %1 (before: %2)")
                                            .arg(r.bytes_after / r.bytes_before, 0, 'f', 4)
                                            .arg(r.bytes_before, 0, 'f', 0));
    items[kModelColumn]->setToolTip(text(r.model));
    if (std::isfinite(r.bits_per_byte_original))
        items[kBitsPerByteColumn]->setToolTip(
            QString("the original: %1").arg(r.bits_per_byte_original, 0, 'f', 4));
    if (!r.task.empty())
        items[kTaskColumn]->setToolTip(QString("%1 on %2 examples (the original: %3)")
                                           .arg(text(r.task))
                                           .arg(r.task_n)
                                           .arg(shown(r.task_accuracy_original, 4)));
    for (auto* item : items) {
        item->setData(index, kRowRole);
        item->setData(text(r.model), kModelRole);
    }
    if (const QString note = perplexity_notes_.value(text(r.model)); !note.isEmpty())
        for (int column : {kPplColumn, kDeltaColumn})
            items[column]->setToolTip(note);
    if (r.ratio > 1) { // stores more than the original part: say so where the number is
        items[3]->setForeground(QColor(176, 0, 0));
        items[3]->setToolTip(
            "ratio > 1: this setting stores more values than the original; not a compression");
    }
    return items;
}

void ResultsView::setPerplexityNote(const QString& model, const QString& note)
{
    if (note.isEmpty())
        perplexity_notes_.remove(model);
    else
        perplexity_notes_[model] = note;
    for (int i = 0; i < model_->rowCount(); ++i)
        if (model_->item(i, 0)->data(kModelRole).toString() == model)
            for (int column : {kPplColumn, kDeltaColumn})
                model_->item(i, column)->setToolTip(note);
}

int ResultsView::addRow(const ResultRow& r)
{
    const int index = static_cast<int>(rows_.size());
    // The original model's row (ratio 1, its perplexity), once per model, part and
    // text: the reference every run is read against. Not a run: not in rows().
    if (std::isfinite(r.ppl_original) && r.params_before > 0) {
        const QString key = text(r.model) + "\n" + text(r.part) + "\n" + text(r.eval_text);
        // The original's task accuracy, once a run on its text measured it.
        for (int i = 0; i < model_->rowCount() && std::isfinite(r.task_accuracy_original); ++i)
            if (model_->item(i, 0)->data(kBaselineRole).toString() == key &&
                !std::isfinite(model_->item(i, kTaskColumn)->data(kSortRole).toDouble())) {
                model_->item(i, kTaskColumn)->setText(shown(r.task_accuracy_original, 4));
                model_->item(i, kTaskColumn)->setData(r.task_accuracy_original, kSortRole);
            }
        if (!baselines_.contains(key)) {
            baselines_.insert(key);
            ResultRow b;
            b.method = "original";
            b.parameters = "uncompressed";
            b.part = r.part;
            b.params_before = b.params_after = r.params_before;
            b.ratio = 1;
            b.bytes_before = b.bytes_after = r.bytes_before; // NaN when the run's are unknown
            b.ppl_original = b.ppl = r.ppl_original;
            b.delta_ln_ppl = 0;
            b.bits_per_byte = b.bits_per_byte_original = r.bits_per_byte_original;
            b.mean_cosine = 1;
            b.seconds = std::numeric_limits<double>::quiet_NaN();
            b.host = r.host;
            b.model = r.model;
            b.eval_text = r.eval_text;
            b.task = r.task;
            b.task_accuracy = b.task_accuracy_original = r.task_accuracy_original;
            b.task_n = r.task_n;
            auto items = rowItems(b, -1);
            items[0]->setData(key, kBaselineRole);
            for (auto* item : items)
                item->setForeground(QColor(90, 90, 90));
            items[0]->setToolTip("the uncompressed model on the same text: the reference of every run");
            model_->appendRow(items);
        }
    }
    rows_.push_back(r);
    auto items = rowItems(r, index);
    // The same settings run again on the same model and text: marked, not hidden.
    for (int i = 0; i < index; ++i)
        if (rows_[i].method == r.method && rows_[i].parameters == r.parameters && rows_[i].model == r.model &&
            rows_[i].eval_text == r.eval_text && rows_[i].host == r.host) {
            items[1]->setText(items[1]->text() + " (repeat)");
            items[1]->setToolTip(
                QString("the same settings as row %1 (same model, text and host)").arg(i + 1));
            break;
        }
    model_->appendRow(items);
    if (model_filter_->findData(text(r.model)) < 0) {
        model_filter_->addItem(modelName(r.model), text(r.model));
        model_filter_->setItemData(model_filter_->count() - 1, text(r.model), Qt::ToolTipRole);
        if (model_filter_->count() > 2) { // a second model: show the one just run, not a mix
            setModelFilter(text(r.model));
            return index;
        }
    }
    rebuildPlot();
    return index;
}

double ResultsView::metric(int row) const
{
    const auto& r = rows_[row];
    switch (y_metric_->currentIndex()) {
    case 1:
        return r.kl_mean;
    case 2:
        return std::isfinite(r.top1_agreement) ? 1.0 - r.top1_agreement : r.top1_agreement;
    case 3:
        return r.ppl;
    case 4:
        return std::isfinite(r.task_accuracy) ? 1.0 - r.task_accuracy : r.task_accuracy;
    case 5:
        return 1.0 - r.mean_cosine;
    case 6: // comparable across tokenizations (issue 60)
        return r.bits_per_byte - r.bits_per_byte_original;
    default:
        return r.delta_ln_ppl;
    }
}

bool ResultsView::symlog() const
{
    return y_scale_->currentIndex() == 1;
}

double ResultsView::symlogOf(double v)
{
    // Linear within ±0.01, logarithmic beyond: one outlier no longer squashes the rest.
    constexpr double c = 0.01;
    return std::copysign(std::log10(1.0 + std::fabs(v) / c), v);
}

double ResultsView::plotted(int row) const
{
    const double v = metric(row);
    return symlog() && std::isfinite(v) ? symlogOf(v) : v;
}

void ResultsView::setYAxis(const QString& metric, bool symlog)
{
    const int i = y_metric_->findText(metric);
    y_metric_->setCurrentIndex(i < 0 ? 0 : i);
    y_scale_chosen_ = true;
    y_scale_->setCurrentIndex(symlog ? 1 : 0);
    rebuildPlot();
}

QString ResultsView::yMetric() const
{
    return y_metric_->currentText();
}

void ResultsView::setXAxis(const QString& metric)
{
    const int i = x_metric_->findText(metric);
    x_chosen_ = true;
    x_metric_->setCurrentIndex(i < 0 ? 0 : i);
    rebuildPlot();
}

void ResultsView::setBaselineMethods(const QStringList& methods)
{
    baseline_methods_ = methods;
    rebuildPlot();
}

QCPGraph* ResultsView::baselineLine(const QString& method) const
{
    return baseline_lines_.value(method, nullptr);
}

double ResultsView::xOf(int row) const
{
    const auto& r = rows_[static_cast<size_t>(row)];
    if (x_metric_->currentIndex() == 0)
        return r.ratio;
    return r.bytes_before > 0 && std::isfinite(r.bytes_after) ? r.bytes_after / r.bytes_before
                                                              : std::numeric_limits<double>::quiet_NaN();
}

void ResultsView::removeRow(int row)
{
    if (row < 0 || row >= static_cast<int>(rows_.size()))
        return;
    auto taken = std::make_shared<TakenRow>();
    undo_->push(new FunctionCommand(
        "delete row", [this, row, taken] { takeRow(row, *taken); },
        [this, row, taken] { restoreRow(row, *taken); }));
}

void ResultsView::takeRow(int row, TakenRow& taken)
{
    taken.row = rows_[static_cast<size_t>(row)];
    rows_.erase(rows_.begin() + row);
    for (int i = model_->rowCount() - 1; i >= 0; --i) {
        const int r = model_->item(i, 0)->data(kRowRole).toInt();
        if (r == row) {
            taken.at = i;
            taken.items = model_->takeRow(i);
        } else if (r > row) {
            for (int c = 0; c < model_->columnCount(); ++c)
                model_->item(i, c)->setData(r - 1, kRowRole);
        }
    }
    if (selected_ == row)
        selected_ = -1;
    else if (selected_ > row)
        --selected_;
    rebuildPlot();
    emit rowRemoved(row);
}

void ResultsView::restoreRow(int row, TakenRow& taken)
{
    for (int i = 0; i < model_->rowCount(); ++i)
        if (const int r = model_->item(i, 0)->data(kRowRole).toInt(); r >= row)
            for (int c = 0; c < model_->columnCount(); ++c)
                model_->item(i, c)->setData(r + 1, kRowRole);
    rows_.insert(rows_.begin() + row, taken.row);
    model_->insertRow(std::clamp(taken.at, 0, model_->rowCount()), taken.items);
    taken.items.clear(); // the model's again
    if (selected_ >= row)
        ++selected_;
    rebuildPlot();
    emit rowRestored(row);
    selectRow(row); // the row put back is the one acted on
}

void ResultsView::setModelFilter(const QString& model)
{
    const int i = model_filter_->findData(model);
    model_filter_->setCurrentIndex(i < 0 ? 0 : i); // -> the proxy's filter and the plot
    if (model_filter_->currentIndex() == (i < 0 ? 0 : i))
        rebuildPlot();
}

QString ResultsView::modelFilter() const
{
    return model_filter_->currentData().toString();
}

void ResultsView::clear()
{
    undo_->clear(); // its deleted rows belonged to the table cleared
    baselines_.clear();
    while (model_filter_->count() > 1)
        model_filter_->removeItem(1);
    rows_.clear();
    model_->removeRows(0, model_->rowCount());
    selected_ = -1;
    rebuildPlot();
}

QCPCurve* ResultsView::series(const QString& method) const
{
    const auto m = methods_.indexOf(method);
    return m >= 0 && m < method_curves_.size() ? method_curves_[m] : nullptr;
}

void ResultsView::rebuildPlot()
{
    const QString filter = modelFilter();
    auto shown_row = [&](int i) { return filter.isEmpty() || text(rows_[i].model) == filter; };
    // With several models shown, a series per method and model: the method's colour,
    // the model's marker shape (models in order of first appearance).
    QStringList models;
    for (int i = 0; i < static_cast<int>(rows_.size()); ++i)
        if (shown_row(i) && !models.contains(text(rows_[i].model)))
            models << text(rows_[i].model);
    const bool per_model = models.size() > 1;
    methods_.clear();
    series_models_.clear();
    method_rows_.clear();
    for (int i = 0; i < static_cast<int>(rows_.size()); ++i) {
        if (!shown_row(i))
            continue;
        const QString method = text(rows_[i].method), model = per_model ? text(rows_[i].model) : QString();
        int m = 0;
        while (m < methods_.size() && (methods_[m] != method || series_models_[m] != model))
            ++m;
        if (m == methods_.size()) {
            methods_.push_back(method);
            series_models_.push_back(model);
            method_rows_.push_back({});
        }
        method_rows_[m].push_back(i);
    }
    for (int i = plot_->plottableCount() - 1; i >= 0; --i)
        if (plot_->plottable(i) != ring_ && plot_->plottable(i) != front_)
            plot_->removePlottable(i); // also the extra fronts and baseline lines
    more_fronts_.clear();
    baseline_lines_.clear();
    method_curves_.clear();
    if (!x_chosen_) { // bytes by default (issue 38), parameters while no row has bytes
        const bool any_bytes = std::any_of(rows_.begin(), rows_.end(), [](const ResultRow& r) {
            return r.bytes_before > 0 && std::isfinite(r.bytes_after);
        });
        const QSignalBlocker quiet(x_metric_);
        x_metric_->setCurrentIndex(any_bytes ? 1 : 0);
    }
    if (!y_scale_chosen_) { // symlog once the shown values span decades (a run 50 nats off beside 0.1s)
        double lo = std::numeric_limits<double>::infinity(), hi = 0;
        for (int i = 0; i < static_cast<int>(rows_.size()); ++i)
            if (const double v = std::fabs(metric(i));
                shown_row(i) && std::isfinite(xOf(i)) && std::isfinite(v) && v > 0)
                lo = std::min(lo, v), hi = std::max(hi, v);
        const QSignalBlocker quiet(y_scale_);
        // Two decades over the largest of the smallest value and symlog's linear 0.01.
        y_scale_->setCurrentIndex(hi > 0 && hi / std::max(lo, 0.01) >= 100 ? 1 : 0);
    }
    // One staircase per group that may be compared (model, part, evaluation text).
    shown_groups_.clear();
    // Fronts by the metric on the y axis (lower is better for each).
    std::vector<ResultRow> by_metric = rows_;
    for (size_t i = 0; i < by_metric.size(); ++i)
        by_metric[i].delta_ln_ppl = metric(static_cast<int>(i)),
        by_metric[i].ratio = xOf(static_cast<int>(i));
    for (auto& g : pareto_fronts(by_metric))
        if (!g.rows.empty() && shown_row(g.rows.front()))
            shown_groups_.push_back(std::move(g));
    const bool several_models = std::any_of(shown_groups_.begin(), shown_groups_.end(), [&](const auto& g) {
        return g.model != shown_groups_.front().model;
    });
    for (size_t g = 0; g < shown_groups_.size(); ++g) {
        const auto& group = shown_groups_[g];
        QCPGraph* graph = front_;
        if (g > 0) {
            graph = plot_->addGraph(plot_->xAxis, plot_->yAxis);
            graph->setLineStyle(QCPGraph::lsStepLeft);
            more_fronts_.push_back(graph);
            // Behind the method series, like the first front.
            graph->setLayer(front_->layer());
        }
        const bool values = group.part.rfind("attention_values", 0) == 0;
        // The attention values' front in flat's colour, dotted, its points marked (a front
        // of one run is a point): never taken for the embedding's grey dashed staircase.
        const QColor front_colour = values ? method_colour("flat").darker(130) : QColor(90, 90, 90);
        graph->setPen(QPen(front_colour, values ? 2.0 : 1.5, values ? Qt::DotLine : Qt::DashLine));
        // Each model's front carries its marker shape (hollow), so fronts are told apart.
        graph->setScatterStyle(
            per_model || values ? QCPScatterStyle(per_model ? model_shape(models.indexOf(text(group.model)))
                                                            : QCPScatterStyle::ssSquare,
                                                  QPen(front_colour, 1.2), Qt::NoBrush, values ? 13 : 7)
                                : QCPScatterStyle());
        QString name = "Pareto front";
        if (values) // the ratio is of the part compressed: V and O, or V, O and the MLP
            name += group.part == "attention_values_and_mlp" ? " (attention values + MLP)"
                                                             : " (attention values)";
        if (several_models)
            name += " — " + modelName(group.model);
        graph->setName(name);
        QVector<double> fx, fy;
        for (int row : group.front) {
            fx << xOf(row);
            fy << plotted(row);
        }
        graph->setData(fx, fy, true); // by ascending ratio already
        if (group.front.empty())
            graph->removeFromLegend();
        else
            graph->addToLegend();
    }
    front_rows_ = shown_groups_.empty() ? std::vector<int>{} : shown_groups_.front().front;
    if (shown_groups_.empty()) {
        front_->data()->clear();
        front_->removeFromLegend();
    }
    double x0 = 0, x1 = 1, y0 = 0, y1 = 0;
    for (int m = 0; m < methods_.size(); ++m) {
        auto* curve = new QCPCurve(plot_->xAxis, plot_->yAxis);
        method_curves_.push_back(curve);
        curve->setName(per_model ? methods_[m] + " — " + modelName(series_models_[m].toStdString())
                                 : methods_[m]);
        curve->setLineStyle(QCPCurve::lsNone);
        const QColor colour = method_colour(methods_[m]);
        curve->setPen(QPen(colour));
        curve->setScatterStyle(QCPScatterStyle(model_shape(per_model ? models.indexOf(series_models_[m]) : 0),
                                               colour, colour, 9));
        QVector<double> t, x, y;
        for (int row : method_rows_[m]) {
            t << t.size();
            x << xOf(row);
            y << plotted(row);
            if (std::isfinite(xOf(row)))
                x1 = std::max(x1, xOf(row));
            if (std::isfinite(plotted(row))) {
                y0 = std::min(y0, plotted(row));
                y1 = std::max(y1, plotted(row));
            }
        }
        curve->setData(t, x, y);
        if (baseline_methods_.contains(methods_[m])) { // joined in order of x, behind the points
            curve->setName(curve->name() + " (baseline)");
            curve->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, colour, colour, 10));
            std::vector<std::pair<double, double>> points;
            for (int i = 0; i < x.size(); ++i)
                if (std::isfinite(x[i]) && std::isfinite(y[i]))
                    points.emplace_back(x[i], y[i]);
            std::sort(points.begin(), points.end());
            auto* line = plot_->addGraph(plot_->xAxis, plot_->yAxis);
            line->setPen(QPen(colour, 1.2, Qt::DashLine));
            line->removeFromLegend();
            line->setLayer(front_->layer());
            QVector<double> lx, ly;
            for (const auto& [px, py] : points)
                lx << px, ly << py;
            line->setData(lx, ly, true);
            baseline_lines_.insert(methods_[m], line);
        }
    }
    plot_->legend->setVisible(!methods_.empty()); // no empty frame before the first run
    show_placeholder(plot_, emptyText());
    QString x_label = x_metric_->currentIndex() == 0 ? "compression ratio (compressed / original parameters)"
                                                     : "bytes ratio (stored bytes after / before)";
    int without_x = 0;
    for (int i = 0; i < static_cast<int>(rows_.size()); ++i)
        without_x += shown_row(i) && !std::isfinite(xOf(i));
    if (without_x > 0)
        x_label +=
            QString(" — %1 run%2 without bytes not drawn").arg(without_x).arg(without_x == 1 ? "" : "s");
    plot_->xAxis->setLabel(x_label);
    plot_->yAxis->setLabel(y_metric_->currentText() + (symlog() ? " (symlog)" : ""));
    if (symlog()) { // ticks at 0, ±10^k in the transformed coordinates, labelled with the values
        auto ticker = QSharedPointer<QCPAxisTickerText>::create();
        ticker->addTick(0, "0");
        for (int e = -2; e <= 12; ++e) // from the linear threshold up
            for (double sign : {1.0, -1.0}) {
                const double v = sign * std::pow(10.0, e);
                const double t = symlogOf(v);
                if (t >= y0 - 0.1 && t <= y1 + 0.1)
                    ticker->addTick(t, QString::number(v, 'g', 3));
            }
        plot_->yAxis->setTicker(ticker);
    } else if (plot_->yAxis->ticker().dynamicCast<QCPAxisTickerText>()) {
        plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    }
    const double pad = std::max(0.05, 0.08 * (y1 - y0));
    plot_->xAxis->setRange(x0, x1 * 1.05);
    plot_->yAxis->setRange(y0 - pad, y1 + pad);
    selectRow(selected_ < static_cast<int>(rows_.size()) && (selected_ < 0 || shown_row(selected_))
                  ? selected_
                  : -1);
}

QString ResultsView::emptyText() const
{
    int shown = 0, drawn = 0;
    for (const auto& rows : method_rows_)
        for (int row : rows) {
            ++shown;
            drawn += std::isfinite(xOf(row)) && std::isfinite(plotted(row));
        }
    if (shown == 0)
        return "No runs yet.\nChoose a method above and press Run:\neach finished run is a point here.";
    if (drawn > 0)
        return {};
    return QString("None of the %1 shown run%2 has a value for %3\non this x axis (the boxes' tooltips say "
                   "what each needs).")
        .arg(shown)
        .arg(shown == 1 ? "" : "s")
        .arg(y_metric_->currentText());
}

void ResultsView::selectRow(int row)
{
    if (row < -1 || row >= static_cast<int>(rows_.size()))
        row = -1;
    const bool changed = row != selected_;
    selected_ = row;
    ring_->data()->clear();
    if (row >= 0) {
        ring_->addData(xOf(row), plotted(row));
        for (int c = 0; c < proxy_->rowCount(); ++c)
            if (proxy_->index(c, 0).data(kRowRole).toInt() == row) {
                if (table_->currentIndex().row() != c)
                    table_->setCurrentIndex(proxy_->index(c, 0));
                table_->scrollTo(proxy_->index(c, 0));
            }
    } else {
        table_->clearSelection();
    }
    plot_->replot(QCustomPlot::rpQueuedReplot);
    windows_->setRun(row >= 0 ? &rows_[row] : nullptr);
    windows_->setVisible(row >= 0 && !rows_[row].window_kl.empty());
    if (changed)
        emit rowSelected(row);
}

void ResultsView::pointClicked(QCPCurve* curve, int index)
{
    if (!curve || curve == ring_)
        return;
    const int m = static_cast<int>(method_curves_.indexOf(curve));
    if (m >= 0 && index >= 0 && index < method_rows_[m].size())
        selectRow(method_rows_[m][index]);
}

QString ResultsView::hoverText(const QPointF& pixel) const
{
    if (!plot_->axisRect()->rect().contains(pixel.toPoint()))
        return {};
    std::vector<int> shown;
    std::vector<double> x, y;
    for (const auto& rows : method_rows_)
        for (int row : rows) {
            shown.push_back(row);
            x.push_back(xOf(row));
            y.push_back(plotted(row));
        }
    const int i = nearest_point(plot_, pixel, x.data(), y.data(), static_cast<int>(x.size()), 8.0);
    if (i < 0)
        return {};
    const auto& r = rows_[shown[i]];
    return QString("%1 %2: %3 %4, PPL %5, Δ ln PPL %6 (%7)")
        .arg(text(r.method), text(r.parameters))
        .arg(x_metric_->currentIndex() == 0 ? "ratio" : "bytes ratio")
        .arg(xOf(shown[i]), 0, 'f', 4)
        .arg(r.ppl, 0, 'g', 6)
        .arg(r.delta_ln_ppl, 0, 'f', 4)
        .arg(modelName(r.model));
}

QVector<DataTable> ResultsView::dataTables() const
{
    const QString y = y_metric_->currentText();
    DataTable pareto{
        "Pareto",
        {"row", "method", "parameters", "model", "part", plot_->xAxis->label().section(" — ", 0, 0), y},
        {}};
    if (symlog())
        pareto.columns << y + " (symlog, as drawn)";
    pareto.columns << "on Pareto front";
    QSet<int> on_front;
    for (const auto& group : shown_groups_)
        for (int row : group.front)
            on_front.insert(row);
    for (const auto& rows : method_rows_) // the plotted rows, series by series
        for (int row : rows) {
            const auto& r = rows_[static_cast<size_t>(row)];
            QStringList cells{QString::number(row + 1),
                              text(r.method),
                              text(r.parameters),
                              text(r.model),
                              text(r.part),
                              csvNumber(xOf(row)),
                              csvNumber(metric(row))};
            if (symlog())
                cells << csvNumber(plotted(row));
            pareto.rows << (cells << (on_front.contains(row) ? "1" : "0"));
        }
    QVector<DataTable> tables{pareto};
    if (windows_->isVisibleTo(this))
        for (DataTable t : plotDataTables(windows_->plot())) {
            t.name = "window " + t.name;
            tables << t;
        }
    return tables;
}

} // namespace embedlab::views
