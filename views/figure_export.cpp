#include "figure_export.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QPdfWriter>
#include <QPointer>
#include <QSaveFile>
#include <QSpinBox>
#include <QSvgGenerator>
#include <qcustomplot.h>

#include "figure_fit.hpp"

namespace embedlab::views {

namespace {

// QCustomPlot sizes fonts in points for a 96 dpi screen: laying a figure out at
// 96 logical pixels per inch gives type its printed size.
constexpr double kLogicalDpi = 96.0;
constexpr const char* kScreenOnly = "embedlab_screen_only";

// Hides what only the screen needs for the lifetime of the object: layerables
// marked setScreenOnly, and QCustomPlot's selection highlight of plottables and
// items. Restores them, then queues a replot.
class ScreenOnlyHidden {
public:
    explicit ScreenOnlyHidden(QCustomPlot* plot) : plot_(plot)
    {
        auto hide = [this](QCPLayerable* l) {
            if (l->visible() && isScreenOnly(l)) {
                l->setVisible(false);
                hidden_.push_back(l);
            }
        };
        for (int i = 0; i < plot->plottableCount(); ++i) {
            QCPAbstractPlottable* p = plot->plottable(i);
            hide(p);
            if (p->selected()) {
                selections_.push_back({p, p->selection()});
                p->setSelection(QCPDataSelection());
            }
        }
        for (int i = 0; i < plot->itemCount(); ++i) {
            QCPAbstractItem* item = plot->item(i);
            hide(item);
            if (item->selected()) {
                selected_items_.push_back(item);
                item->setSelected(false);
            }
        }
        for (int i = 0; i < plot->layerCount(); ++i)
            if (QCPLayer* layer = plot->layer(i); layer->visible() && layer->property(kScreenOnly).toBool()) {
                layer->setVisible(false);
                hidden_layers_.push_back(layer);
            }
    }
    ~ScreenOnlyHidden()
    {
        for (auto& l : hidden_)
            if (l)
                l->setVisible(true);
        for (auto& layer : hidden_layers_)
            if (layer)
                layer->setVisible(true);
        for (auto& [p, selection] : selections_)
            if (p)
                p->setSelection(selection);
        for (auto& item : selected_items_)
            if (item)
                item->setSelected(true);
        if (!hidden_.isEmpty() || !hidden_layers_.isEmpty() || !selections_.isEmpty() ||
            !selected_items_.isEmpty())
            plot_->replot(QCustomPlot::rpQueuedReplot);
    }

private:
    QCustomPlot* plot_;
    QVector<QPointer<QCPLayerable>> hidden_;
    QVector<QPointer<QCPLayer>> hidden_layers_;
    QVector<std::pair<QPointer<QCPAbstractPlottable>, QCPDataSelection>> selections_;
    QVector<QPointer<QCPAbstractItem>> selected_items_;
};

// Applies the publication style for the lifetime of the object, then restores.
class PublicationStyle {
public:
    PublicationStyle(QCustomPlot* plot, bool apply) : plot_(plot)
    {
        if (!apply)
            return;
        // QCustomPlot reads back only a background pixmap, not its brush; the views
        // keep QCustomPlot's default solid white brush, restored as such below.
        background_ = plot->background();
        plot->setBackground(QBrush(Qt::white));
        const QFont label("DejaVu Sans", 8), ticks("DejaVu Sans", 7);
        const QPen black(Qt::black, 0.8);
        auto style = [&](QCPAxis* axis) {
            axes_.push_back({axis, axis->labelFont(), axis->tickLabelFont(), axis->basePen(), axis->tickPen(),
                             axis->subTickPen(), axis->grid()->pen(), axis->visible(), axis->ticks(),
                             axis->tickLabels(), axis->grid()->visible(), axis->grid()->zeroLinePen(),
                             axis->tickLengthIn(), axis->tickLengthOut(), axis->subTickLengthIn(),
                             axis->subTickLengthOut()});
            axis->setLabelFont(label);
            axis->setTickLabelFont(ticks);
            axis->setBasePen(black);
            axis->setTickPen(black);
            axis->setSubTickPen(black);
            // As matplotlib draws them: ticks outside the box, no grid.
            axis->setTickLength(0, 3);
            axis->setSubTickLength(0, 1.5);
            axis->grid()->setVisible(false);
            axis->grid()->setZeroLinePen(Qt::NoPen);
        };
        for (auto* rect : plot->axisRects()) {
            for (auto* axis : rect->axes()) {
                style(axis);
                // A box around the axes: the top and right spines, without ticks.
                if (!axis->visible() &&
                    (axis->axisType() == QCPAxis::atTop || axis->axisType() == QCPAxis::atRight)) {
                    axis->setVisible(true);
                    axis->setTicks(false);
                    axis->setTickLabels(false);
                }
            }
        }
        // Colour bars: their axis in the same type and pens as every other axis.
        for (auto* element : plot->plotLayout()->elements(true))
            if (auto* scale = qobject_cast<QCPColorScale*>(element))
                style(scale->axis());
        // Every legend, inset or in a row of the layout (legends need not be QObject
        // children of the plot: found through the layout, which reaches inset layouts).
        QVector<QCPLegend*> legends;
        for (auto* element : plot->plotLayout()->elements(true))
            if (auto* legend = qobject_cast<QCPLegend*>(element); legend && !legends.contains(legend))
                legends.push_back(legend);
        for (auto* legend : legends) {
            legends_.push_back({legend, legend->font(), legend->borderPen()});
            legend->setFont(ticks);
            legend->setBorderPen(Qt::NoPen);
        }
    }
    ~PublicationStyle()
    {
        if (axes_.isEmpty() && legends_.isEmpty())
            return;
        if (background_.isNull())
            plot_->setBackground(QBrush(Qt::white));
        else
            plot_->setBackground(background_);
        for (const auto& a : axes_) {
            a.axis->setLabelFont(a.label);
            a.axis->setTickLabelFont(a.ticks);
            a.axis->setBasePen(a.base);
            a.axis->setTickPen(a.tick);
            a.axis->setSubTickPen(a.subtick);
            a.axis->grid()->setPen(a.grid);
            a.axis->setVisible(a.visible);
            a.axis->setTicks(a.has_ticks);
            a.axis->setTickLabels(a.tick_labels);
            a.axis->grid()->setVisible(a.grid_visible);
            a.axis->grid()->setZeroLinePen(a.zero_line);
            a.axis->setTickLength(a.tick_in, a.tick_out);
            a.axis->setSubTickLength(a.subtick_in, a.subtick_out);
        }
        for (const auto& l : legends_) {
            l.legend->setFont(l.font);
            l.legend->setBorderPen(l.border);
        }
        plot_->replot(QCustomPlot::rpQueuedReplot);
    }

private:
    struct Axis {
        QCPAxis* axis;
        QFont label, ticks;
        QPen base, tick, subtick, grid;
        bool visible, has_ticks, tick_labels, grid_visible;
        QPen zero_line;
        int tick_in, tick_out, subtick_in, subtick_out;
    };
    struct Legend {
        QCPLegend* legend;
        QFont font;
        QPen border;
    };
    QCustomPlot* plot_;
    QPixmap background_;
    QVector<Axis> axes_;
    QVector<Legend> legends_;
};

// The view's figure layout for one figure: set up on construction, undone on destruction.
class FigureLayoutHook : public QObject {
public:
    FigureLayoutHook(QCustomPlot* plot, FigureLayout layout) : QObject(plot), layout_(std::move(layout))
    {
        setObjectName(kLayoutHook);
    }
    static FigureLayoutHook* of(QCustomPlot* plot)
    {
        return plot->findChild<FigureLayoutHook*>(kLayoutHook, Qt::FindDirectChildrenOnly);
    }
    void operator()(const QSize& size) const { layout_(size); }

    static constexpr const char* kLayoutHook = "embedlab_figure_layout";

private:
    FigureLayout layout_;
};

class SizedLayout {
public:
    SizedLayout(QCustomPlot* plot, const QSize& size) : hook_(FigureLayoutHook::of(plot))
    {
        if (hook_)
            (*hook_)(size);
    }
    ~SizedLayout()
    {
        if (hook_)
            (*hook_)(QSize());
    }

private:
    QPointer<FigureLayoutHook> hook_;
};

// Everything a figure differs in from the window, for the lifetime of the object:
// no screen-only marks, the view's layout at the size (a panel it adds is styled
// too), the publication style, then what every figure needs at its size
// (figure_fit.hpp). Undone in the reverse order.
class FigureSession {
public:
    FigureSession(QCustomPlot* plot, const FigureOptions& o)
        : screen_only_(plot), layout_(plot, figurePixels(o)), style_(plot, o.publication),
          fit_(plot, figurePixels(o))
    {
    }

private:
    ScreenOnlyHidden screen_only_;
    SizedLayout layout_;
    PublicationStyle style_;
    FigureFit fit_;
};

QString failure(const QString& file, const QString& problem)
{
    return file + ": " + problem;
}

// As QCustomPlot::savePdf sets up its painter: vector output, no pixmap caches,
// the figure's logical size mapped onto the page.
bool vectorPainter(QCPPainter& painter, int width, int height)
{
    if (!painter.isActive())
        return false;
    painter.setMode(QCPPainter::pmVectorized);
    painter.setMode(QCPPainter::pmNoCaching);
    painter.setWindow(0, 0, width, height);
    return true;
}

} // namespace

void setScreenOnly(QCPLayerable* layerable, bool screen_only)
{
    if (layerable)
        layerable->setProperty(kScreenOnly, screen_only);
}

void setScreenOnly(QCPLayer* layer, bool screen_only)
{
    if (layer)
        layer->setProperty(kScreenOnly, screen_only);
}

bool isScreenOnly(const QCPLayerable* layerable)
{
    return layerable && layerable->property(kScreenOnly).toBool();
}

void setFigureLayout(QCustomPlot* plot, FigureLayout layout)
{
    delete FigureLayoutHook::of(plot);
    if (layout)
        new FigureLayoutHook(plot, std::move(layout));
}

QSize figurePixels(const FigureOptions& o)
{
    return {qRound(o.width_in * kLogicalDpi), qRound(o.width_in * o.aspect * kLogicalDpi)};
}

void drawFigure(QCustomPlot* plot, QCPPainter* painter, const FigureOptions& o)
{
    const FigureSession session(plot, o);
    const QSize size = figurePixels(o);
    plot->toPainter(painter, size.width(), size.height());
}

FigureFormat figureFormat(const QString& file)
{
    const QString suffix = QFileInfo(file).suffix().toLower();
    if (suffix == "png")
        return FigureFormat::Png;
    if (suffix == "pdf")
        return FigureFormat::Pdf;
    if (suffix == "svg")
        return FigureFormat::Svg;
    return FigureFormat::Unknown;
}

QString exportFigure(QCustomPlot* plot, const QString& file, const FigureOptions& o)
{
    const FigureFormat format = figureFormat(file);
    if (format == FigureFormat::Unknown)
        return failure(file, "unknown figure format (use .png, .pdf or .svg)");
    if (!(o.width_in > 0) || !(o.aspect > 0) || o.dpi < 10 || o.dpi > 2400)
        return failure(file, "figure size or DPI out of range");
    const int width = figurePixels(o).width();
    const int height = figurePixels(o).height();
    QSaveFile out(file);
    if (!out.open(QIODevice::WriteOnly))
        return failure(file, out.errorString());
    const FigureSession session(plot, o);
    bool drawn = true;
    if (format == FigureFormat::Png) {
        const double scale = o.dpi / kLogicalDpi;
        QImage image = plot->toPixmap(width, height, scale).toImage();
        image.setDotsPerMeterX(qRound(o.dpi / 0.0254));
        image.setDotsPerMeterY(qRound(o.dpi / 0.0254));
        drawn = image.save(&out, "PNG");
    } else if (format == FigureFormat::Pdf) {
        QPdfWriter pdf(&out);
        pdf.setResolution(static_cast<int>(kLogicalDpi));
        pdf.setPageSize(QPageSize(QSizeF(o.width_in, o.width_in * o.aspect), QPageSize::Inch));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        pdf.setCreator("EmbedLab");
        QCPPainter painter(&pdf);
        drawn = vectorPainter(painter, width, height);
        if (drawn)
            plot->toPainter(&painter, width, height);
    } else {
        QSvgGenerator svg;
        svg.setOutputDevice(&out);
        svg.setResolution(static_cast<int>(kLogicalDpi));
        svg.setSize(QSize(width, height));
        svg.setViewBox(QRect(0, 0, width, height));
        svg.setTitle("EmbedLab figure");
        QCPPainter painter(&svg);
        drawn = vectorPainter(painter, width, height);
        if (drawn)
            plot->toPainter(&painter, width, height);
    }
    if (!drawn) {
        out.cancelWriting();
        return failure(file, "could not render the figure");
    }
    if (!out.commit())
        return failure(file, out.errorString());
    return {};
}

FigureExportDialog::FigureExportDialog(QWidget* parent)
    : QDialog(parent), preset_(new QComboBox(this)), aspect_(new QDoubleSpinBox(this)),
      dpi_(new QSpinBox(this)), publication_(new QCheckBox("clean publication style", this))
{
    setWindowTitle("Export figure");
    preset_->addItem("single column (3.5 in)", kSingleColumnInches);
    preset_->addItem("double column (7.2 in)", kDoubleColumnInches);
    preset_->addItem("slide (10 in)", kSlideInches);
    aspect_->setRange(0.2, 2.0);
    aspect_->setSingleStep(0.05);
    aspect_->setValue(0.62);
    dpi_->setRange(72, 1200);
    dpi_->setValue(300);
    dpi_->setSuffix(" dpi (PNG)");
    publication_->setChecked(true);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* form = new QFormLayout(this);
    form->addRow("Width", preset_);
    form->addRow("Height / width", aspect_);
    form->addRow("Resolution", dpi_);
    form->addRow(publication_);
    form->addRow(buttons);
}

FigureOptions FigureExportDialog::options() const
{
    return {.width_in = preset_->currentData().toDouble(),
            .aspect = aspect_->value(),
            .dpi = dpi_->value(),
            .publication = publication_->isChecked()};
}

} // namespace embedlab::views
