#include "neighbour_graph_view.hpp"

#include "neighbour_map_style.hpp"
#include "token_text.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFontMetrics>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSaveFile>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>
#include <QWidgetAction>
#include <qcustomplot.h>

#include "figure_export.hpp"
#include "hover.hpp"
#include "plot_interaction.hpp"

namespace embedlab::views {

using namespace neighbour_map;

namespace {

// A label's leader: thin and grey, under the label's halo; hidden until placed apart.
QCPItemLine* leaderLine(QCustomPlot* plot)
{
    auto* line = new QCPItemLine(plot);
    line->setObjectName("leader");
    line->setPen(QPen(QColor(90, 90, 90), 0.7));
    line->setSelectable(false);
    line->setVisible(false);
    return line;
}

constexpr double kLabelGap = 5; // between a point and its label: clear of the ring around it

// Top-left corners for a w x h label of the point p, nearest first: right, left, the four
// diagonals, above, below, one and two lines up or down on either side; near an edge (a
// narrow figure) above or below, slid sideways into `area`; then, for a crowd, up to five
// lines away (joined to the point by a leader line).
QVector<QPointF> label_corners(const QPointF& p, double w, double h, const QRectF& area)
{
    constexpr double gap = kLabelGap;
    QVector<QPointF> tries{{p.x() + gap, p.y() - h / 2},           {p.x() - gap - w, p.y() - h / 2},
                           {p.x() + gap / 2, p.y() - gap - h},     {p.x() + gap / 2, p.y() + gap},
                           {p.x() - gap / 2 - w, p.y() - gap - h}, {p.x() - gap / 2 - w, p.y() + gap},
                           {p.x() - w / 2, p.y() - gap - h},       {p.x() - w / 2, p.y() + gap}};
    for (int s = 1; s <= 2; ++s)
        for (const double dy : {-s * h, s * h}) {
            tries.push_back({p.x() + gap, p.y() - h / 2 + dy});
            tries.push_back({p.x() - gap - w, p.y() - h / 2 + dy});
        }
    const double slid = std::clamp(p.x() - w / 2, area.left(), std::max(area.left(), area.right() - w));
    for (int s = 0; s <= 2; ++s) {
        tries.push_back({slid, p.y() - gap - h - s * h});
        tries.push_back({slid, p.y() + gap + s * h});
    }
    for (int s = 3; s <= 5; ++s)
        for (const double dy : {-s * h, s * h}) {
            tries.push_back({p.x() + gap, p.y() - h / 2 + dy});
            tries.push_back({p.x() - gap - w, p.y() - h / 2 + dy});
            tries.push_back({slid, p.y() - h / 2 + dy});
        }
    return tries;
}

// The first place beside `p` inside `area` clear of every `taken` box for `label` showing
// `words`, as the box QCPItemText draws (the text's bounding rect plus padding); with
// nothing taken, the first inside `area`. Empty: none.
QRectF free_label_place(const QCPItemText* label, const QString& words, const QPointF& p, const QRectF& area,
                        const QVector<QRectF>& taken)
{
    const QRect bound = QFontMetrics(label->font())
                            .boundingRect(0, 0, 0, 0, Qt::TextDontClip | label->textAlignment(), words);
    const QMargins pad = label->padding();
    const QSizeF size(bound.width() + pad.left() + pad.right(), bound.height() + pad.top() + pad.bottom());
    for (const QPointF& corner : label_corners(p, size.width(), size.height(), area)) {
        const QRectF box(corner, size);
        if (area.contains(box) && std::none_of(taken.begin(), taken.end(),
                                               [&](const QRectF& other) { return box.intersects(other); }))
            return box;
    }
    return {};
}

} // namespace

NeighbourGraphView::NeighbourGraphView(QWidget* parent)
    : DataPlotView(parent), search_(new QLineEdit(this)), stats_(readout_label(this)),
      side_(new QTabWidget(this)), list_title_(new QLabel(this)), list_(new QTableWidget(0, 4, this)),
      colour_(new QComboBox(this)), layout_(new QComboBox(this)), drag_(new QComboBox(this)),
      density_toggle_(new QCheckBox("Density shading", this)), perplexity_(new QDoubleSpinBox(this)),
      iterations_(new QSpinBox(this)), seed_(new QSpinBox(this)), sample_(new QSpinBox(this)),
      layout_note_(readout_label(this)), chosen_title_(new QLabel(this)),
      chosen_list_(new QTableWidget(0, 4, this))
{
    // Under every point: the density of all tokens, an image (hidden unless asked for).
    plot_->addLayer("density", plot_->layer("main"), QCustomPlot::limBelow);
    density_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
    density_->setLayer("density");
    density_->setName("token density");
    density_->removeFromLegend();
    density_->setInterpolate(false);
    density_->setTightBoundary(true);
    QCPColorGradient grey;
    grey.clearColorStops();
    grey.setColorStopAt(0, QColor(215, 215, 215));
    grey.setColorStopAt(1, QColor(45, 45, 45));
    density_->setGradient(grey);
    density_->setVisible(false);
    auto* common = plot_->addGraph();
    common->setName("common (kept)");
    common->setLineStyle(QCPGraph::lsNone);
    common->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, kCommonGrey, 3));
    // Rare tokens are what the view is about: above the common ones (which are
    // frequent, grey and many), below the selection's edges and labels.
    plot_->addLayer("rare", plot_->layer("main"), QCustomPlot::limAbove);
    for (const auto& band : kBands) {
        auto* g = plot_->addGraph();
        g->setName(band.name);
        g->setLineStyle(QCPGraph::lsNone);
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, band.colour, 4));
        g->removeFromLegend(); // the colour bar says which cosine a colour is
    }
    // A layer draws its plottables in the order they joined it: the best band first,
    // the worst last, so no well-rebuilt token hides a badly rebuilt one.
    for (int b = kBandCount - 1; b >= 0; --b)
        plot_->graph(kFirstBand + b)->setLayer("rare");
    auto* selection = plot_->addGraph();
    selection->setLineStyle(QCPGraph::lsNone);
    selection->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::black, 1.5), Qt::NoBrush, 9));
    selection->removeFromLegend();
    plot_->addLayer("selection", plot_->layer("rare"), QCustomPlot::limAbove);
    selection->setLayer("selection");
    // The box / lasso: its outline (screen only), rings on the chosen tokens, and a
    // ring on a searched token. Curves, not graphs: the graphs are the colour bands.
    auto curve = [this](const QString& name, const QCPScatterStyle& style) {
        auto* c = new QCPCurve(plot_->xAxis, plot_->yAxis);
        c->setName(name);
        c->setLayer("selection");
        c->setScatterStyle(style);
        c->setLineStyle(QCPCurve::lsNone);
        c->removeFromLegend();
        return c;
    };
    outline_ = curve("selection outline", QCPScatterStyle());
    outline_->setLineStyle(QCPCurve::lsLine);
    outline_->setPen(QPen(QColor(20, 20, 20), 1.2, Qt::DashLine));
    outline_->setBrush(QColor(0, 0, 0, 28)); // the region a lasso took, shaded
    setScreenOnly(outline_);
    chosen_rings_ = curve("selected tokens", QCPScatterStyle(QCPScatterStyle::ssCircle,
                                                             QPen(QColor(0, 0, 0), 1), Qt::NoBrush, 6));
    outline_->setLayer("selection"); // over the rings: a layer draws in the order it was joined
    highlight_ring_ = curve("searched token", QCPScatterStyle(QCPScatterStyle::ssCircle,
                                                              QPen(QColor(148, 0, 211), 2), Qt::NoBrush, 12));
    plot_->xAxis->setLabel("principal component 1");
    plot_->yAxis->setLabel("principal component 2");
    install_navigation(plot_); // the scatter zooms and pans; a reset
    // Top: the scatter and the histogram side by side; under both, the legend.
    // Outside the axis rect it can never hide the selected token's edges and labels.
    auto* scatter = plot_->axisRect();
    auto* top = new QCPLayoutGrid;
    plot_->plotLayout()->take(scatter);
    plot_->plotLayout()->addElement(0, 0, top);
    top->addElement(0, 0, scatter); // first, so plot_->axisRect() stays the scatter
    // Under both, one row: the legend (common tokens) and the rare tokens' colours,
    // the cosine bands as a colour bar (as matplotlib's horizontal colorbar).
    scale_ = new QCPColorScale(plot_);
    scale_->setType(QCPAxis::atBottom);
    scale_->setBarWidth(6);
    scale_->setRangeDrag(false);
    scale_->setRangeZoom(false);
    scale_->setDataRange(QCPRange(kScaleLow, 1.0));
    scale_->setGradient(cosine_gradient());
    scale_->axis()->setTicker(cosine_ticks());
    scale_->axis()->setSubTicks(false);
    scale_->setAutoMargins(QCP::msTop | QCP::msBottom); // clear of the figure's right edge
    scale_->setMargins(QMargins(2, 0, 12, 0));
    scatter->insetLayout()->take(plot_->legend);
    auto* key = new QCPLayoutGrid;
    plot_->plotLayout()->addElement(1, 0, key);
    key->addElement(0, 0, plot_->legend);
    scale_label_ = new QCPTextElement(plot_, "rare, by cosine:", QFont(font().family(), 8));
    scale_label_->setTextFlags(Qt::AlignRight | Qt::AlignVCenter);
    scale_label_->setMargins(QMargins(4, 0, 2, 6)); // level with the bar, above its tick labels
    key->addElement(0, 1, scale_label_);
    key->addElement(0, 2, scale_);
    key->setColumnStretchFactor(0, 1);
    key->setColumnStretchFactor(1, 0.8);
    key->setColumnStretchFactor(2, 1.4);
    plot_->plotLayout()->setRowStretchFactor(1, 0.001); // as tall as its entries need
    plot_->plotLayout()->setRowSpacing(0);
    plot_->legend->setVisible(true);
    plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    plot_->legend->setWrap(3); // 2 rows of 3: narrow enough for a single-column figure
    plot_->legend->setBorderPen(Qt::NoPen);
    plot_->legend->setFont(QFont(font().family(), 8));
    plot_->legend->setMargins(QMargins(4, 0, 4, 2));
    plot_->legend->setIconSize(10, 10); // the points are dots: a small swatch says it
    plot_->legend->setIconTextPadding(3);

    hist_rect_ = new QCPAxisRect(plot_);
    hist_rect_->setRangeDrag({});
    hist_rect_->setRangeZoom({});
    top->addElement(0, 1, hist_rect_);
    top->setColumnStretchFactor(1, 0.45);
    auto* heights = new QCPMarginGroup(plot_); // the scatter and the histogram: one height
    scatter->setMarginGroup(QCP::msTop | QCP::msBottom, heights);
    hist_rect_->setMarginGroup(QCP::msTop | QCP::msBottom, heights);
    // Two short lines, and an axis at least as wide as the longest: the label is
    // centred on the axis, so it stays inside the figure even at single-column width.
    QCPAxis* cosine_axis = hist_rect_->axis(QCPAxis::atBottom);
    cosine_axis->setLabel("reconstruction\ncosine");
    QFont label_font = cosine_axis->labelFont();
    label_font.setPointSizeF(std::max(label_font.pointSizeF(), 9.0)); // covers the export's 8 pt type
    const QFontMetrics metrics(label_font);
    hist_rect_->setMinimumSize(
        metrics.boundingRect(QRect(), Qt::TextDontClip, cosine_axis->label()).width() + 4, 0);
    cosine_axis->ticker()->setTickCount(3); // a narrow axis: "0 0.20.40.60.8 1" collided (issue 61)
    hist_rect_->axis(QCPAxis::atLeft)->setLabel("rare tokens");
    hist_ = new QCPBars(hist_rect_->axis(QCPAxis::atBottom), hist_rect_->axis(QCPAxis::atLeft));
    hist_->setBrush(QColor(31, 119, 180, 170));
    hist_->setPen(QPen(QColor(31, 119, 180)));
    hist_->removeFromLegend();
    // A few bins hold most rare tokens: their counts span decades.
    navigation(plot_)->addLogToggle(hist_rect_->axis(QCPAxis::atLeft), "histogram counts");

    connect(plot_, &QCustomPlot::mousePress, this, &NeighbourGraphView::pressed);
    connect(plot_, &QCustomPlot::mouseMove, this, &NeighbourGraphView::moved);
    connect(plot_, &QCustomPlot::mouseRelease, this, &NeighbourGraphView::clicked);
    // A short placeholder the box shows whole at 1366 px; the exact rules in its tooltip.
    search_->setObjectName("neighbour_search");
    search_->setPlaceholderText("token or id");
    search_->setToolTip("Any token, matched exactly (\u2423 or a space for spaces, \\n for a newline), "
                        "or a token id; Return finds it");
    search_->setMinimumWidth(search_->fontMetrics().horizontalAdvance(search_->placeholderText()) +
                             3 * search_->fontMetrics().height()); // the frame's and text's margins
    auto* go = new QPushButton("Find", this);
    go->setToolTip("A rare token: its neighbours; a common one: ringed and labelled on the map");
    connect(search_, &QLineEdit::returnPressed, this, [this] { search(search_->text()); });
    connect(go, &QPushButton::clicked, this, [this] { search(search_->text()); });
    auto* csv = new QPushButton("Export coordinates CSV…", this);
    csv->setToolTip("Every token's id, text, shown x and y, rare/common, the selection, its LLE weight, "
                    "reconstruction cosine and frequency, as CSV (for a notebook or a spreadsheet)");
    connect(csv, &QPushButton::clicked, this, &NeighbourGraphView::exportCsvInteractively);

    list_->setHorizontalHeaderLabels({"token", "id", "α", "cos"});
    list_->horizontalHeaderItem(2)->setToolTip("LLE weight of this neighbour (the weights sum to 1)");
    list_->horizontalHeaderItem(3)->setToolTip(
        "cosine of the selected rare token's row and this neighbour's row (— if not computed)");
    list_->verticalHeader()->setVisible(false);
    list_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    list_->setSelectionBehavior(QAbstractItemView::SelectRows);
    list_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    list_->horizontalHeader()->setStretchLastSection(true);
    list_title_->setWordWrap(true);
    list_title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    chosen_list_->setHorizontalHeaderLabels({"token", "id", "kind", "value"});
    chosen_list_->verticalHeader()->setVisible(false);
    chosen_list_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    chosen_list_->setSelectionBehavior(QAbstractItemView::SelectRows);
    chosen_list_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    chosen_list_->horizontalHeader()->setStretchLastSection(true);
    chosen_title_->setWordWrap(true);
    chosen_title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* chosen_csv = new QPushButton("Export selection CSV…", this);
    chosen_csv->setToolTip(
        "The box / lasso selection's tokens: id, text, x, y, kind, cosine, frequency, value");
    connect(chosen_csv, &QPushButton::clicked, this, &NeighbourGraphView::exportSelectionInteractively);
    auto* chosen_clear = new QPushButton("Clear", this);
    connect(chosen_clear, &QPushButton::clicked, this, [this] {
        lasso_.clear();
        outline_->data()->clear();
        setSelection({});
    });
    // Beside the map, one page at a time (the neighbours, the selection, a page the window
    // adds): three columns side by side crushed the last one's axes at 1280 px.
    auto* neighbours_page = new QWidget(side_);
    auto* neighbours_layout = new QVBoxLayout(neighbours_page);
    neighbours_layout->addWidget(list_title_);
    neighbours_layout->addWidget(list_, 1);
    auto* chosen_page = new QWidget(side_);
    auto* chosen_layout = new QVBoxLayout(chosen_page);
    chosen_layout->addWidget(chosen_title_);
    chosen_layout->addWidget(chosen_list_, 1);
    auto* chosen_buttons = new QHBoxLayout;
    chosen_buttons->addWidget(chosen_csv);
    chosen_buttons->addWidget(chosen_clear);
    chosen_layout->addLayout(chosen_buttons);
    side_->setObjectName("neighbour_side_pages");
    side_->addTab(neighbours_page, "Neighbours");
    side_->addTab(chosen_page, "Selection");
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(plot_);
    split->addWidget(side_);
    // The map two thirds of the width: the side pages' lists need far less (with stretch
    // factors set, a splitter shares its width in proportion to these sizes).
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 1);
    split->setSizes({640, 320});
    split->setChildrenCollapsible(false); // never crushes the map's axes
    auto* controls = lay_out_view(
        this,
        "<b>What am I seeing.</b> Tokens seen often in a frequency text are common and kept exactly; "
        "each rare token y is rebuilt from its k most similar common tokens: with unit-norm rows, solve "
        "G w = 1 for the local Gram G<sub>jl</sub> = (y − x<sub>j</sub>)·(y − x<sub>l</sub>), normalise "
        "the weights to sum 1, and rescale Σ α<sub>j</sub> x<sub>j</sub> to ‖y‖. Every token is shown on "
        "the first two principal components or a t-SNE map; click or search a rare token to see its "
        "neighbours (edge width = weight). Points are drawn in order of the colour, the worst last (on "
        "top); drag with box or lasso to list tokens.",
        split);
    controls->addWidget(search_);
    controls->addWidget(go);
    stats_->setObjectName("neighbour_stats");
    controls->addWidget(stats_, 1);
    controls->addWidget(csv);

    // Second row: what the map shows. Colour, density, what a drag does, the layout.
    auto* map_row = new QHBoxLayout;
    colour_->setToolTip("What colours the points; they are drawn in its order, the worst on top");
    colour_->setSizeAdjustPolicy(QComboBox::AdjustToContents); // "damage: KL as target" whole
    map_row->addWidget(new QLabel("Colour by", this));
    map_row->addWidget(colour_);
    density_toggle_->setToolTip("Every token's density as a grey image under the points; the background "
                                "tokens (common, or without a value) are not drawn as points, the rest "
                                "translucent but for the worst band");
    map_row->addWidget(density_toggle_);
    drag_->addItems({"Drag pans", "Drag selects a box", "Drag draws a lasso"});
    drag_->setToolTip(
        "A drag on the map: pans it, or selects the tokens in a box or lasso (listed on the right)");
    map_row->addWidget(drag_);
    layout_->addItems({"PCA (every token)", "t-SNE (a sample)"});
    layout_->setToolTip("The 2-D map: the first two principal components, or a t-SNE over a random sample "
                        "of tokens (computed as a job; the other tokens are placed at the mean of their "
                        "nearest sampled tokens)");
    map_row->addWidget(new QLabel("Layout", this));
    map_row->addWidget(layout_);
    perplexity_->setRange(2, 200);
    perplexity_->setValue(30);
    iterations_->setRange(250, 10000);
    iterations_->setSingleStep(250);
    iterations_->setValue(1000);
    seed_->setRange(0, 1000000);
    sample_->setRange(200, 50000);
    sample_->setSingleStep(1000);
    sample_->setValue(5000);
    sample_->setGroupSeparatorShown(true);
    // t-SNE's four settings in a menu: on the row they made it wider than a 1366-px window
    // ("Colour by"'s box drawn under "Density shading"), and a row of their own took the
    // map's height (issue 61).
    map_row->addWidget(tsneSettingsButton());
    auto* run_tsne = new QPushButton("Compute t-SNE", this);
    run_tsne->setToolTip("Barnes-Hut t-SNE (van der Maaten 2014) over the sample, on the table's first 50 "
                         "principal components; early exaggeration 12 for 250 iterations");
    connect(run_tsne, &QPushButton::clicked, this, &NeighbourGraphView::requestLayout);
    map_row->addWidget(run_tsne);
    map_row->addStretch(1);
    auto* frame = qobject_cast<QVBoxLayout*>(layout());
    frame->addLayout(map_row);
    frame->addWidget(layout_note_);
    connect(colour_, &QComboBox::currentIndexChanged, this, [this] {
        drawValues();
        fillChosenList();
        plot_->replot(QCustomPlot::rpQueuedReplot);
    });
    connect(density_toggle_, &QCheckBox::toggled, this, [this] {
        drawValues();
        plot_->replot(QCustomPlot::rpQueuedReplot);
    });
    connect(drag_, &QComboBox::currentIndexChanged, this,
            [this](int mode) { plot_->setInteraction(QCP::iRangeDrag, mode == Pan); });
    connect(layout_, &QComboBox::currentIndexChanged, this, &NeighbourGraphView::showLayout);
    install_hover(plot_, [this](const QPointF& p) { return hoverText(p); });
    // Labels are placed in pixels: again after every layout (resize, zoom, export size).
    connect(plot_, &QCustomPlot::afterLayout, this, [this] {
        styleMarkers();
        binDensity();
        placeLabels();
    });
    layouts_.resize(1);
    fillChosenList();
}

QToolButton* NeighbourGraphView::tsneSettingsButton()
{
    auto* form_page = new QWidget(this);
    auto* form = new QFormLayout(form_page);
    form->addRow("Perplexity", perplexity_);
    form->addRow("Iterations", iterations_);
    form->addRow("Seed", seed_);
    form->addRow("Sample (tokens)", sample_);
    auto* menu = new QMenu(this);
    auto* page = new QWidgetAction(menu);
    page->setDefaultWidget(form_page);
    menu->addAction(page);
    auto* button = new QToolButton(this);
    button->setObjectName("tsne_settings");
    button->setText("t-SNE settings");
    button->setPopupMode(QToolButton::InstantPopup);
    button->setMenu(menu);
    // The tooltip says the settings Compute t-SNE will use, without opening the menu.
    const auto describe = [this, button] {
        button->setToolTip(QString("Compute t-SNE uses perplexity %1, %2 iterations, seed %3, a sample of "
                                   "%4 tokens")
                               .arg(perplexity_->value())
                               .arg(iterations_->value())
                               .arg(seed_->value())
                               .arg(QLocale().toString(sample_->value())));
    };
    connect(perplexity_, &QDoubleSpinBox::valueChanged, button, describe);
    for (QSpinBox* spin : {iterations_, seed_, sample_})
        connect(spin, &QSpinBox::valueChanged, button, describe);
    describe();
    return button;
}

void NeighbourGraphView::draw()
{
    const int V = static_cast<int>(std::min(data_.x.size(), data_.y.size()));
    rare_slot_.fill(-1, V);
    for (int i = 0; i < data_.rare.size(); ++i)
        if (data_.rare[i] >= 0 && data_.rare[i] < V)
            rare_slot_[data_.rare[i]] = i;
    // Layout 0 is the data's PCA; a computed one stays while it has a point per token
    // (the same table: the window clears the graph when the model changes).
    NeighbourMapLayout pca{"principal component",
                           data_.x.mid(0, V),
                           data_.y.mid(0, V),
                           {},
                           "PCA: every token on the table's first two principal components."};
    const bool keep = layouts_.size() > 1 && layouts_[1].x.size() == V && V > 0;
    if (keep)
        layouts_[0] = pca;
    else
        layouts_ = {pca};
    // The colour columns this graph has.
    const int column = colour_->currentData().isValid() ? colour_->currentData().toInt() : Cosine;
    {
        const QSignalBlocker block(colour_);
        colour_->clear();
        colour_->addItem("reconstruction cosine (rare)", Cosine);
        if (data_.frequency.size() == V && V > 0)
            colour_->addItem("frequency in the text", Frequency);
        colour_->addItem("rare / common", RareCommon);
        if (!values_label_.isEmpty())
            colour_->addItem(values_label_, Values);
        colour_->setCurrentIndex(std::max(0, colour_->findData(column)));
    }

    const int bins = static_cast<int>(data_.histogram.size());
    QVector<double> centres, counts;
    double top = 1;
    const double width = bins > 0 ? (1.0 - data_.hist_lo) / bins : 1.0;
    for (int i = 0; i < bins; ++i) {
        centres << data_.hist_lo + (i + 0.5) * width;
        counts << data_.histogram[i];
        top = std::max(top, data_.histogram[i]);
    }
    hist_->setWidth(width);
    hist_->setData(centres, counts, true);
    hist_rect_->axis(QCPAxis::atBottom)->setRange(data_.hist_lo, 1.0);
    hist_rect_->axis(QCPAxis::atLeft)->setRange(0, top * 1.08);
    selected_ = -1;
    highlighted_ = -1;
    chosen_.clear();
    lasso_.clear();
    outline_->data()->clear();
    const int shown = keep ? layout_->currentIndex() : 0;
    {
        const QSignalBlocker block(layout_);
        layout_->setCurrentIndex(shown);
    }
    showLayout(shown);
    if (pending_ >= 0 && V > 0)
        showToken(std::exchange(pending_, -1), std::exchange(pending_run_, {}));
}

int NeighbourGraphView::rareTokenAt(const QPointF& pixel, double radius) const
{
    int best = -1;
    double best_d2 = radius * radius;
    for (int id : data_.rare) {
        if (id < 0 || id >= lx_.size())
            continue;
        const double dx = plot_->xAxis->coordToPixel(lx_[id]) - pixel.x();
        const double dy = plot_->yAxis->coordToPixel(ly_[id]) - pixel.y();
        if (dx * dx + dy * dy < best_d2) {
            best_d2 = dx * dx + dy * dy;
            best = id;
        }
    }
    return best;
}

void NeighbourGraphView::clicked(QMouseEvent* event)
{
    const QPointF p = event->position();
    const QRectF dragged = lasso_.boundingRect(); // a lasso may end where it began
    if (std::exchange(dragging_, false) &&
        dragged.width() + dragged.height() + (p - press_).manhattanLength() > 4) {
        moved(event); // the release point closes the outline
        setSelection(tokensInside(lasso_));
        return;
    }
    if ((p - press_).manhattanLength() > 4 || !plot_->axisRect()->rect().contains(p.toPoint()))
        return; // a drag, or outside the scatter
    const int id = rareTokenAt(p);
    if (id >= 0)
        selectToken(id);
}

bool NeighbourGraphView::selectToken(int id)
{
    if (id < 0 || id >= rare_slot_.size() || rare_slot_[id] < 0)
        return false;
    selected_ = id;
    highlighted_ = id;
    drawSelection();
    side_->setCurrentIndex(0); // its neighbours
    emit tokenSelected(id);
    return true;
}

bool NeighbourGraphView::showToken(int id, const QString& other_run)
{
    if (data_.x.isEmpty()) {
        pending_ = id;
        pending_run_ = other_run;
        return false;
    }
    if (selectToken(id))
        return true;
    if (!other_run.isEmpty() && id >= 0 && id < lx_.size()) { // ringed where it is, the selection kept
        highlighted_ = id;
        drawSelection();
        stats_->setText(
            QString("%1token %2, from the worst predictions of %3: ringed on the map. Only LLE "
                    "splits rare from common tokens; this run compresses every row.")
                .arg(id < data_.tokens.size() ? "'" + escaped_token(data_.tokens[id]) + "' " : QString())
                .arg(id)
                .arg(other_run));
        return false;
    }
    stats_->setText(QString("'%1' (token %2) is not a rare token: common tokens are kept as they are")
                        .arg(escaped_token(data_.tokens.value(id)))
                        .arg(id));
    return false;
}

bool NeighbourGraphView::search(const QString& typed)
{
    // Exactly the token typed (" the" is not "the"; '␣' and \n notation accepted),
    // a rare token first, then a token id, then any token.
    const QString text = unescaped_token(typed);
    for (int rare : data_.rare)
        if (rare < data_.tokens.size() && data_.tokens[rare] == text)
            return selectToken(rare);
    bool numeric = false;
    int id = typed.toInt(&numeric);
    if (numeric && !typed.contains(' ')) {
        if (selectToken(id))
            return true;
    } else {
        id = static_cast<int>(std::find(data_.tokens.begin(), data_.tokens.end(), text) -
                              data_.tokens.begin());
    }
    if (id < 0 || id >= lx_.size()) {
        stats_->setText("'" + escaped_token(text) + "' is not a token of this vocabulary");
        return false;
    }
    // A common token: ringed and labelled where it is, the rare selection kept.
    highlighted_ = id;
    drawSelection();
    stats_->setText(
        QString("%1token %2 is %3: kept as it is, ringed on the map")
            .arg(id < data_.tokens.size() ? "'" + escaped_token(data_.tokens[id]) + "' " : QString())
            .arg(id)
            .arg(rare_slot_.value(id, -1) < 0 && !data_.common.contains(id) ? "not rare" : "common"));
    return false;
}

void NeighbourGraphView::drawSelection()
{
    plot_->clearItems();
    labels_.clear();
    label_at_.clear();
    label_texts_.clear();
    leaders_.clear();
    plot_->setCurrentLayer("selection"); // edges and labels above every point
    QVector<double> sx, sy;
    if (selected_ >= 0) {
        const int slot = rare_slot_[selected_];
        const QPointF y(lx_[selected_], ly_[selected_]);
        sx << y.x();
        sy << y.y();
        double top = 1e-12;
        for (int j = 0; j < data_.k; ++j)
            top = std::max(top, std::abs(data_.weights.value(slot * data_.k + j)));
        struct Label {
            int id;
            QPointF at;
            QString extra;
            double weight;
        };
        QVector<Label> pending;
        for (int j = 0; j < data_.k; ++j) {
            const int n = data_.neighbours.value(slot * data_.k + j, -1);
            if (n < 0 || n >= lx_.size())
                continue;
            const double w = data_.weights.value(slot * data_.k + j);
            const QPointF at(lx_[n], ly_[n]);
            auto* edge = new QCPItemLine(plot_);
            edge->start->setCoords(y);
            edge->end->setCoords(at);
            edge->setPen(QPen(w >= 0 ? QColor(40, 40, 40, 200) : QColor(214, 39, 40, 200),
                              0.8 + 4.0 * std::abs(w) / top));
            pending.push_back({n, at, QString(" (α %1)").arg(w, 0, 'f', 2), w});
            sx << at.x();
            sy << at.y();
        }
        // Placement order: the selected token, then the neighbours by |weight| (ties:
        // best first as given), so the labels that matter most get the best places.
        std::stable_sort(pending.begin(), pending.end(), [](const Label& a, const Label& b) {
            return std::abs(a.weight) > std::abs(b.weight);
        });
        pending.push_front({selected_, y, QString(), 0.0});
        if (highlighted_ >= 0 && highlighted_ != selected_)
            pending.insert(1, {highlighted_, QPointF(lx_[highlighted_], ly_[highlighted_]), QString(), 0.0});
        always_ = highlighted_ >= 0 && highlighted_ != selected_ ? 2 : 1;
        for (const auto& l : pending) {
            leaders_ << leaderLine(plot_);
            auto* text = halo_text(plot_);
            text->position->setCoords(l.at);
            text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
            text->setPadding(QMargins(1, 0, 1, 0));
            const QString compact =
                (l.id < data_.tokens.size() ? "'" + escaped_token(data_.tokens[l.id]) + "' " : QString()) +
                QString::number(l.id);
            text->setText(compact + l.extra);
            text->setFont(QFont(font().family(), 8));
            labels_ << text;
            label_at_ << l.at;
            label_texts_.push_back({compact + l.extra, compact});
        }
    }
    if (selected_ < 0 && highlighted_ >= 0 && highlighted_ < lx_.size()) { // a searched common token alone
        leaders_ << leaderLine(plot_);
        auto* text = halo_text(plot_);
        text->position->setCoords(lx_[highlighted_], ly_[highlighted_]);
        text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        text->setPadding(QMargins(1, 0, 1, 0));
        text->setText((highlighted_ < data_.tokens.size()
                           ? "'" + escaped_token(data_.tokens[highlighted_]) + "' "
                           : QString()) +
                      QString::number(highlighted_));
        text->setFont(QFont(font().family(), 8));
        labels_ << text;
        label_at_ << QPointF(lx_[highlighted_], ly_[highlighted_]);
        label_texts_.push_back({text->text(), text->text()});
        always_ = 1;
    }
    if (highlighted_ >= 0 && highlighted_ != selected_ && highlighted_ < lx_.size())
        highlight_ring_->setData({0.0}, {lx_[highlighted_]}, {ly_[highlighted_]}, true);
    else
        highlight_ring_->data()->clear();
    plot_->graph(kSelection)->setData(sx, sy);
    stats_->setText(summary());
    fillNeighbourList();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void NeighbourGraphView::placeLabels()
{
    if (labels_.isEmpty())
        return;
    QCPAxis* x = plot_->axisRect()->axis(QCPAxis::atBottom);
    QCPAxis* y = plot_->axisRect()->axis(QCPAxis::atLeft);
    const QRectF area = plot_->axisRect()->rect();
    QVector<QPointF> points;
    QVector<QRectF> taken; // the selection's markers (9 px rings), then each placed label
    for (const QPointF& c : label_at_) {
        const QPointF p(x->coordToPixel(c.x()), y->coordToPixel(c.y()));
        points << p;
        taken << QRectF(p - QPointF(5, 5), QSizeF(10, 10));
    }
    for (int i = 0; i < labels_.size(); ++i) {
        QCPItemText* text = labels_[i];
        const QPointF p = points[i];
        // The whole label where it fits; else without its weight (a single column's
        // axes are narrower than "'token' id (α 0.22)"), which most often fits.
        const auto& [whole, compact] = label_texts_[i];
        QString words = whole;
        QRectF box = free_label_place(text, words, p, area, taken);
        if (box.isEmpty() && compact != whole) {
            words = compact;
            box = free_label_place(text, words, p, area, taken);
        }
        // The selected (and searched) token is always labelled; a neighbour with no free place is not.
        if (box.isEmpty() && i < always_)
            box = free_label_place(text, words, p, area, {});
        if (compact != whole)
            text->setText(words);
        text->setVisible(!box.isEmpty());
        QCPItemLine* leader = leaders_.value(i);
        if (leader)
            leader->setVisible(false);
        if (box.isEmpty())
            continue;
        text->position->setPixelPosition(box.topLeft());
        taken << box;
        // A label pushed away from its point by others: a thin line says whose it is.
        const QPointF nearest(std::clamp(p.x(), box.left(), box.right()),
                              std::clamp(p.y(), box.top(), box.bottom()));
        if (leader && QLineF(p, nearest).length() > kLabelGap + 3) {
            leader->start->setPixelPosition(p);
            leader->end->setPixelPosition(nearest);
            leader->setVisible(true);
        }
    }
}

void NeighbourGraphView::fillNeighbourList()
{
    list_->setRowCount(0);
    if (selected_ < 0) {
        list_title_->setText(data_.x.isEmpty() ? QString()
                                               : "Click or search a rare token to list its neighbours.");
        return;
    }
    const int slot = rare_slot_[selected_];
    list_title_->setText(QString("<b>Neighbours of %1%2</b> (k = %3), rebuilt with cosine %4")
                             .arg(selected_ < data_.tokens.size()
                                      ? ("'" + escaped_token(data_.tokens[selected_]) + "' ").toHtmlEscaped()
                                      : QString())
                             .arg(selected_)
                             .arg(data_.k)
                             .arg(data_.cosine.value(slot), 0, 'f', 4));
    auto cell = [](const QString& text, bool number) {
        auto* item = new QTableWidgetItem(text);
        if (number)
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        return item;
    };
    const bool cosines = data_.neighbour_cosine.size() == data_.weights.size();
    for (int j = 0; j < data_.k; ++j) {
        const int n = data_.neighbours.value(slot * data_.k + j, -1);
        if (n < 0)
            continue;
        const int r = list_->rowCount();
        list_->insertRow(r);
        list_->setItem(
            r, 0, cell(n < data_.tokens.size() ? "'" + escaped_token(data_.tokens[n]) + "'" : "", false));
        list_->setItem(r, 1, cell(QString::number(n), true));
        list_->setItem(r, 2, cell(QString::number(data_.weights.value(slot * data_.k + j), 'f', 4), true));
        list_->setItem(r, 3,
                       cell(cosines ? QString::number(data_.neighbour_cosine[slot * data_.k + j], 'f', 4)
                                    : QString::fromUtf8("\u2014"),
                            true));
    }
}

QString NeighbourGraphView::exportCoordinatesCsv(const QString& file) const
{
    QSaveFile out(file);
    if (!out.open(QIODevice::WriteOnly | QIODevice::Text))
        return file + ": " + out.errorString();
    QVector<double> weight(data_.x.size(), std::nan(""));
    if (selected_ >= 0) {
        const int slot = rare_slot_[selected_];
        for (int j = 0; j < data_.k; ++j) {
            const int n = data_.neighbours.value(slot * data_.k + j, -1);
            if (n >= 0 && n < weight.size())
                weight[n] = data_.weights.value(slot * data_.k + j);
        }
    }
    QVector<char> kind(data_.x.size(), 'o');
    for (int id : data_.common)
        if (id >= 0 && id < kind.size())
            kind[id] = 'c';
    for (int id : data_.rare)
        if (id >= 0 && id < kind.size())
            kind[id] = 'r';
    QVector<char> boxed(data_.x.size(), 0);
    for (int id : chosen_)
        boxed[id] = 1;
    QByteArray text = "id,token,x,y,kind,selected,weight,cosine,frequency,in_box\n";
    const int V = static_cast<int>(std::min(lx_.size(), ly_.size()));
    for (int id = 0; id < V; ++id) {
        const int slot = rare_slot_.value(id, -1);
        // Concatenated, not QString::arg-chained: a token may itself contain "%1".
        const QString line =
            QString::number(id) + ',' +
            csv_quoted(id < data_.tokens.size() ? escaped_token(data_.tokens[id]) : QString()) + ',' +
            QString::number(lx_[id], 'g', 17) + ',' + QString::number(ly_[id], 'g', 17) + ',' +
            (kind[id] == 'r'   ? "rare"
             : kind[id] == 'c' ? "common"
                               : "other") +
            ',' + (id == selected_ ? '1' : '0') + ',' +
            (std::isnan(weight[id]) ? QString() : QString::number(weight[id], 'g', 17)) + ',' +
            (slot >= 0 && slot < data_.cosine.size() ? QString::number(data_.cosine[slot], 'g', 17)
                                                     : QString()) +
            ',' + (id < data_.frequency.size() ? QString::number(data_.frequency[id], 'g', 17) : QString()) +
            ',' + (boxed.value(id) ? '1' : '0') + '\n';
        text += line.toUtf8();
        if (text.size() > (1 << 20)) {
            if (out.write(text) != text.size())
                break;
            text.clear();
        }
    }
    if (out.write(text) != text.size() || !out.commit())
        return file + ": " + out.errorString();
    return {};
}

void NeighbourGraphView::exportCsvInteractively()
{
    const QString file =
        QFileDialog::getSaveFileName(this, "Export coordinates", "neighbour_graph.csv", "CSV (*.csv)");
    if (file.isEmpty())
        return;
    const QString error = exportCoordinatesCsv(file);
    if (!error.isEmpty())
        QMessageBox::warning(this, "Export coordinates", error);
    else
        stats_->setText(summary() + ". Coordinates written to " + file);
}

void NeighbourGraphView::addSidePage(QWidget* pane, const QString& title)
{
    // Scrolled when the window is short: squeezed below its minimum the pane's widgets
    // would be drawn over each other.
    auto* scroll = new QScrollArea(side_);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidget(pane);
    side_->addTab(scroll, title);
}

void NeighbourGraphView::showSidePage(int index)
{
    side_->setCurrentIndex(index);
}

QString NeighbourGraphView::summary() const
{
    if (data_.x.isEmpty())
        return "no neighbour graph";
    double mean = 0;
    for (double c : data_.cosine)
        mean += c;
    mean = data_.cosine.isEmpty() ? 0.0 : mean / data_.cosine.size();
    QString s = QString("%1 common, %2 rare tokens, k = %3; mean rare reconstruction cosine %4")
                    .arg(data_.common.size())
                    .arg(data_.rare.size())
                    .arg(data_.k)
                    .arg(mean, 0, 'f', 4);
    if (selected_ >= 0)
        s += QString(". Token %1%2: reconstruction cosine %3")
                 .arg(selected_)
                 .arg(selected_ < data_.tokens.size() ? " '" + escaped_token(data_.tokens[selected_]) + "'"
                                                      : QString())
                 .arg(data_.cosine.value(rare_slot_[selected_]), 0, 'f', 4);
    return s;
}

QString NeighbourGraphView::hoverText(const QPointF& pixel) const
{
    if (data_.x.isEmpty() || !plot_->axisRect()->rect().contains(pixel.toPoint()))
        return {};
    const int id = nearest_point(plot_, pixel, lx_.constData(), ly_.constData(),
                                 static_cast<int>(std::min(lx_.size(), ly_.size())), 6.0);
    if (id < 0)
        return {};
    QString text = QString("id %1").arg(id);
    if (id < data_.tokens.size())
        text = "'" + escaped_token(data_.tokens[id]) + "' " + text;
    if (!values_label_.isEmpty() && id < values_.size())
        text += QString(", %1 %2").arg(values_label_).arg(values_[id], 0, 'g', 4);
    const int slot = id < rare_slot_.size() ? rare_slot_[id] : -1;
    if (slot >= 0)
        return text + QString(": rare, rebuilt with cosine %1 (click for its neighbours)")
                          .arg(data_.cosine.value(slot), 0, 'f', 4);
    return text + ": common (kept as a row)";
}

} // namespace embedlab::views
