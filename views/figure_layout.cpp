#include "figure_layout.hpp"

#include <QPaintDevice>
#include <QPaintEngine>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

namespace embedlab::views {

namespace {

// A paint engine that draws nothing and keeps every text item with its box in
// device pixels (under the painter's transform: rotated tick labels too) and the
// clip in force. AllFeatures: QPainter hands over transforms and text as they are.
class TextRecorder : public QPaintEngine {
public:
    explicit TextRecorder(const QRectF& canvas) : QPaintEngine(AllFeatures), canvas_(canvas), clip_(canvas) {}

    bool begin(QPaintDevice*) override { return true; }
    bool end() override { return true; }
    Type type() const override { return User; }
    void drawPixmap(const QRectF&, const QPixmap&, const QRectF&) override {}
    void drawPath(const QPainterPath&) override {}
    void drawPolygon(const QPointF*, int, PolygonDrawMode) override {}
    void drawPolygon(const QPoint*, int, PolygonDrawMode) override {}
    void drawImage(const QRectF&, const QImage&, const QRectF&, Qt::ImageConversionFlags) override {}

    void updateState(const QPaintEngineState& state) override
    {
        const auto dirty = state.state();
        if (dirty & DirtyTransform)
            transform_ = state.transform();
        // QCustomPlot clips each layerable to its clipRect (a legend entry to its cell).
        if (dirty & DirtyClipRegion)
            clip_ = transform_.map(state.clipRegion()).boundingRect();
        if (dirty & DirtyClipPath)
            clip_ = transform_.map(state.clipPath()).boundingRect();
        if (dirty & DirtyClipEnabled)
            clip_enabled_ = state.isClipEnabled();
    }

    void drawTextItem(const QPointF& p, const QTextItem& item) override
    {
        if (item.text().trimmed().isEmpty())
            return;
        const QRectF logical(p.x(), p.y() - item.ascent(), item.width(), item.ascent() + item.descent());
        texts_.push_back({item.text(),
                          transform_.mapRect(logical),
                          transform_.map(QPolygonF(logical)),
                          clip_enabled_ ? clip_ : canvas_,
                          {}});
    }

    QVector<FigureText> texts_;

private:
    QRectF canvas_;
    QTransform transform_;
    QRectF clip_;
    bool clip_enabled_ = false;
};

class RecordingDevice : public QPaintDevice {
public:
    explicit RecordingDevice(const QSize& size) : size_(size), engine_(QRectF(QPointF(0, 0), size)) {}
    ~RecordingDevice() override = default;
    QPaintEngine* paintEngine() const override { return &engine_; }
    QVector<FigureText> texts() const { return engine_.texts_; }

protected:
    int metric(PaintDeviceMetric m) const override
    {
        switch (m) {
        case PdmWidth:
            return size_.width();
        case PdmHeight:
            return size_.height();
        case PdmWidthMM:
            return qRound(size_.width() * 25.4 / 96);
        case PdmHeightMM:
            return qRound(size_.height() * 25.4 / 96);
        case PdmDpiX:
        case PdmDpiY:
        case PdmPhysicalDpiX:
        case PdmPhysicalDpiY:
            return 96; // as exportFigure lays figures out
        case PdmDepth:
            return 32;
        case PdmNumColors:
            return INT_MAX;
        case PdmDevicePixelRatio:
            return 1;
        case PdmDevicePixelRatioScaled:
            return static_cast<int>(devicePixelRatioFScale());
        default:
            return QPaintDevice::metric(m);
        }
    }

private:
    QSize size_;
    mutable TextRecorder engine_;
};

QString describe(const FigureText& t)
{
    const QRect r = t.box.toAlignedRect();
    return QString("'%1' (%2 at %3,%4 %5x%6)")
        .arg(t.text, t.where)
        .arg(r.x())
        .arg(r.y())
        .arg(r.width())
        .arg(r.height());
}

// How far `inner` reaches beyond `outer` on its worst side (<= 0: inside).
double overhang(const QRectF& inner, const QRectF& outer)
{
    return std::max({outer.left() - inner.left(), inner.right() - outer.right(), outer.top() - inner.top(),
                     inner.bottom() - outer.bottom()});
}

// `shape` pulled in by `by` towards its centre on every side (a turned box stays turned).
QPolygonF shrunk(const QPolygonF& shape, double by)
{
    if (shape.size() != 5) // a closed box: four corners and the first again
        return shape;
    const QPointF centre = (shape[0] + shape[2]) / 2;
    QPolygonF out;
    for (const QPointF& corner : shape) {
        const QPointF towards = centre - corner;
        const double length = std::hypot(towards.x(), towards.y());
        out << (length > 2 * by ? corner + towards * (by * 1.4142 / length) : centre);
    }
    return out;
}

} // namespace

QVector<FigureText> figureTexts(QCustomPlot* plot, const FigureOptions& options)
{
    const QSize size = figurePixels(options);
    RecordingDevice device(size);
    // The layout as drawn (the session undoes it afterwards): which element holds each text.
    QVector<std::pair<QRectF, QString>> elements;
    const auto seen = QObject::connect(plot, &QCustomPlot::afterLayout, plot, [&] {
        elements.clear();
        for (auto* e : plot->plotLayout()->elements(true)) {
            if (!e || !e->visible())
                continue;
            if (qobject_cast<QCPLegend*>(e))
                elements.push_back({e->outerRect(), "legend"});
            else if (qobject_cast<QCPColorScale*>(e))
                elements.push_back({e->outerRect(), "colour bar"});
            else if (qobject_cast<QCPTextElement*>(e))
                elements.push_back({e->outerRect(), "title"});
        }
        for (auto* rect : plot->axisRects())
            if (rect->visible())
                elements.push_back({rect->rect(), "axes"});
    });
    {
        QCPPainter painter(&device);
        painter.setMode(QCPPainter::pmVectorized);
        painter.setMode(QCPPainter::pmNoCaching);
        drawFigure(plot, &painter, options);
    }
    QObject::disconnect(seen);
    // A halo (the same text drawn a pixel or two around itself, then over that) is one text.
    QVector<FigureText> texts;
    for (const auto& t : device.texts()) {
        auto same = std::find_if(texts.begin(), texts.end(), [&](const FigureText& o) {
            return o.text == t.text && std::abs(o.box.x() - t.box.x()) <= 3 &&
                   std::abs(o.box.y() - t.box.y()) <= 3;
        });
        if (same == texts.end())
            texts << t;
    }
    for (auto& t : texts) {
        t.where = "margin"; // axis and tick labels sit outside their axes
        for (const auto& [rect, name] : elements)
            if (rect.contains(t.box.center())) {
                t.where = name;
                break;
            }
    }
    return texts;
}

QStringList figureLayoutProblems(QCustomPlot* plot, const FigureOptions& options, double tolerance)
{
    const QVector<FigureText> texts = figureTexts(plot, options);
    const QSize size = figurePixels(options);
    const QRectF canvas(QPointF(0, 0), size);
    QStringList problems;
    for (int a = 0; a < texts.size(); ++a) {
        const auto& t = texts[a];
        if (overhang(t.box, canvas) > tolerance)
            problems << QString("%1 leaves the %2x%3 canvas")
                            .arg(describe(t))
                            .arg(size.width())
                            .arg(size.height());
        else if (overhang(t.box, t.clip) > tolerance)
            problems << QString("%1 is cut by its clip %2,%3 %4x%5")
                            .arg(describe(t))
                            .arg(t.clip.x())
                            .arg(t.clip.y())
                            .arg(t.clip.width())
                            .arg(t.clip.height());
        for (int b = a + 1; b < texts.size(); ++b) {
            const QRectF both = t.box.intersected(texts[b].box);
            if (both.width() > tolerance && both.height() > tolerance &&
                shrunk(t.shape, tolerance).intersects(shrunk(texts[b].shape, tolerance)))
                problems << QString("%1 overlaps %2").arg(describe(t), describe(texts[b]));
        }
    }
    return problems;
}

} // namespace embedlab::views
